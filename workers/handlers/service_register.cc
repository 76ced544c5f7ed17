// service.* handlers (launch / wait_ready / stop / watch), used by every run kind that
// runs a vLLM service. Contract: docs/TASKS.md.
#include "workers/handlers/handlers.h"
#include "workers/handlers/service_handlers.h"
#include "workers/typed_handler.h"

namespace npuprof::workers {

void RegisterServiceHandlers(WorkerRuntime& runtime) {
  RegisterTyped(runtime, service::Launch);
  RegisterTyped(runtime, service::WaitReady);
  RegisterTyped(runtime, service::Stop);
  RegisterTyped(runtime, service::Watch);
  RegisterTyped(runtime, service::HbmSample);
}

}  // namespace npuprof::workers
