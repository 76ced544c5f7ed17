#include "workers/handlers/handlers.h"
#include "workers/handlers/torch_profile_handlers.h"
#include "workers/typed_handler.h"

namespace npuprof::workers {

void RegisterTorchProfileHandlers(WorkerRuntime& runtime) {
  RegisterTyped(runtime, TorchProfilePrepareImage);
  RegisterTyped(runtime, TorchProfileControl);
  RegisterTyped(runtime, TorchProfileRequests);
  RegisterTyped(runtime, TorchProfileCaptureCheck);
  RegisterTyped(runtime, TorchProfileListDirs);
  RegisterTyped(runtime, TorchProfileAnalyseRank);
  RegisterTyped(runtime, TorchProfileWaitFlush);
}

}  // namespace npuprof::workers
