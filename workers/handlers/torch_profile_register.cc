#include "statemachine/torch_profile_tasks.h"
#include "workers/handlers/handlers.h"
#include "workers/handlers/torch_profile_handlers.h"

namespace npuprof::workers {

void RegisterTorchProfileHandlers(WorkerRuntime& runtime) {
  runtime.Register(sm::kTpPrepareImageTask, TorchProfilePrepareImage);
  runtime.Register(sm::kTpControlTask, TorchProfileControl);
  runtime.Register(sm::kTpRequestsTask, TorchProfileRequests);
  runtime.Register(sm::kTpListDirsTask, TorchProfileListDirs);
  runtime.Register(sm::kTpAnalyseRankTask, TorchProfileAnalyseRank);
  runtime.Register(sm::kTpWaitFlushTask, TorchProfileWaitFlush);
}

}  // namespace npuprof::workers
