// Registers the memory-profile task handlers (see workers/memory/memory_tasks.h).
#include "workers/handlers/handlers.h"
#include "workers/memory/memory_tasks.h"
#include "workers/typed_handler.h"

namespace npuprof::workers {

void RegisterMemoryProfileHandlers(WorkerRuntime& runtime) {
  RegisterTyped(runtime, MemPreflight);
  RegisterTyped(runtime, MemNpuSmi);
  RegisterTyped(runtime, MemLogs);
  RegisterTyped(runtime, MemInfer);
  RegisterTyped(runtime, MemExport);
  RegisterTyped(runtime, MemCollectCsvs);
  RegisterTyped(runtime, MemWeights);
  RegisterTyped(runtime, MemWaitFlush);
  RegisterTyped(runtime, MemOperatorMemory);
}

}  // namespace npuprof::workers
