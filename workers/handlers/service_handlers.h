// The service.* task handlers (contract: docs/TASKS.md).
#pragma once

#include "task_payloads.pb.h"
#include "workers/task_outcome.h"

namespace npuprof::workers::service {

// service.launch: runtime dir, _serve.sh, detached start in its own process
// group, or adoption of the run's live service. Result: runtime_dir, pid,
// port, devices, serve_argv, logs, adopted.
TaskOutcome Launch(const tasks::ServiceLaunch& p, const proto::Task& task, TaskContext& ctx);
// service.wait_ready: polls /health and /v1/models over SSH, checking the pid
// every round; fails at once when the service dies (stderr tail, env hint).
TaskOutcome WaitReady(const tasks::ServiceWaitReady& p, const proto::Task& task, TaskContext& ctx);
// service.stop: SIGINT, grace, SIGTERM, grace, SIGKILL only with force, to the
// process group, while it still holds the service's marked processes. A
// service already gone (or never started, or whose pid now belongs to
// another process) is success.
TaskOutcome Stop(const tasks::ServiceStop& p, const proto::Task& task, TaskContext& ctx);

// service.watch: answers only when the service died (or when cancelled).
TaskOutcome Watch(const tasks::ServiceWatch& p, const proto::Task& task, TaskContext& ctx);

// service.hbm_sample: one HBM sample of the service's devices (serve
// --watch-hbm): npu-smi info between two readings of the target's clock.
TaskOutcome HbmSample(const tasks::ServiceHbmSample& p, const proto::Task& task, TaskContext& ctx);

}  // namespace npuprof::workers::service
