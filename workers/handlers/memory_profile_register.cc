// Registers the memory-profile task handlers (see workers/memory/memory_tasks.h).
#include "statemachine/memory_profile_machine.h"
#include "workers/handlers/handlers.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

void RegisterMemoryProfileHandlers(WorkerRuntime& runtime) {
  runtime.Register(sm::kMemPreflightTask, MemPreflight);
  runtime.Register(sm::kMemNpuSmiTask, MemNpuSmi);
  runtime.Register(sm::kMemLogsTask, MemLogs);
  runtime.Register(sm::kMemInferTask, MemInfer);
  runtime.Register(sm::kMemExportTask, MemExport);
  runtime.Register(sm::kMemCollectTask, MemCollectCsvs);
  runtime.Register(sm::kMemWeightsTask, MemWeights);
  runtime.Register(sm::kMemWaitFlushTask, MemWaitFlush);
}

}  // namespace npuprof::workers
