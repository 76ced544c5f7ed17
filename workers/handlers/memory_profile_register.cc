// Placeholder until the run kind lands; replaced by its own implementation.
#include "workers/handlers/handlers.h"

namespace npuprof::workers {

void RegisterMemoryProfileHandlers(WorkerRuntime&) {}

}  // namespace npuprof::workers
