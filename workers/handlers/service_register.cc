// service.* handlers (launch / wait_ready / stop), used by every run kind that
// runs a vLLM service. Contract: docs/TASKS.md.
#include "statemachine/service_spec.h"
#include "workers/handlers/handlers.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers {

void RegisterServiceHandlers(WorkerRuntime& runtime) {
  runtime.Register(sm::kServiceLaunchTask, service::Launch);
  runtime.Register(sm::kServiceWaitReadyTask, service::WaitReady);
  runtime.Register(sm::kServiceStopTask, service::Stop);
  runtime.Register(sm::kServiceWatchTask, service::Watch);
}

}  // namespace npuprof::workers
