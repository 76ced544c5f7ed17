// Task handlers of the torch-profile and analyse-root runs: each is given
// its kind's payload message (proto/task_payloads.proto); what it answers is
// in docs/TASKS.md.
#pragma once

#include "task_payloads.pb.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

TaskOutcome TorchProfilePrepareImage(const tasks::TorchProfilePrepareImage& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileControl(const tasks::TorchProfileControl& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileRequests(const tasks::TorchProfileRequests& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileCaptureCheck(const tasks::TorchProfileCaptureCheck& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileListDirs(const tasks::TorchProfileListProfileDirs& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileAnalyseRank(const tasks::TorchProfileAnalyseRank& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome TorchProfileWaitFlush(const tasks::TorchProfileWaitFlush& p, const proto::Task& task, TaskContext& ctx);

}  // namespace npuprof::workers
