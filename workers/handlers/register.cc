#include "workers/handlers/handlers.h"
#include "workers/typed_handler.h"

namespace npuprof::workers {

void RegisterDefaultHandlers(WorkerRuntime& runtime) {
  RegisterTyped(runtime, ProbeNpuSmi);
  RegisterTyped(runtime, MachineCheck);
  RegisterTyped(runtime, MachineClock);
  RegisterServiceHandlers(runtime);
  RegisterTorchProfileHandlers(runtime);
  RegisterMemoryProfileHandlers(runtime);
}

}  // namespace npuprof::workers
