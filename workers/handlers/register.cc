#include "statemachine/machine_check_machine.h"
#include "statemachine/probe_machine.h"
#include "workers/handlers/handlers.h"

namespace npuprof::workers {

void RegisterDefaultHandlers(WorkerRuntime& runtime) {
  runtime.Register(sm::kProbeTask, ProbeNpuSmi);
  runtime.Register(sm::kMachineCheckTask, MachineCheck);
  RegisterServiceHandlers(runtime);
  RegisterTorchProfileHandlers(runtime);
  RegisterMemoryProfileHandlers(runtime);
}

}  // namespace npuprof::workers
