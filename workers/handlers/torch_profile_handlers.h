// Task handlers of the torch-profile and analyse-root runs (task kinds in
// statemachine/torch_profile_tasks.h, contract in docs/TASKS.md).
#pragma once

#include "workers/task_outcome.h"

namespace npuprof::workers {

TaskOutcome TorchProfilePrepareImage(const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileControl(const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileRequests(const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileListDirs(const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileAnalyseRank(const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileWaitFlush(const proto::Task& task, TaskContext& ctx);

}  // namespace npuprof::workers
