// Helpers shared by the service.* handlers (launch, wait_ready, stop): the
// task payload, the process group status on the target, log tails and the
// start-up diagnostics (stderr tail, known environment errors with a hint).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "workers/handlers/service_scripts.h"
#include "workers/remote.h"
#include "workers/task_outcome.h"

namespace npuprof::workers::service {

// A parsed payload and a session to its machine; `failure` is set when
// either could not be had (then nothing else is valid).
struct Call {
  json payload;
  ssh::SshTarget target;
  std::shared_ptr<ssh::SshSession> session;
  std::optional<TaskOutcome> failure;
};
Call Open(const proto::Task& task, TaskContext& ctx);

// Status of the process group led by pid on the target.
Result<GroupStatus> QueryGroup(ssh::SshSession& session, int64_t pid);

// The last max_bytes of a remote file ("" when it does not exist).
Result<std::string> ReadTail(ssh::SshSession& session, const std::string& path, uint64_t max_bytes);

// Log diagnostics of a runtime dir: {"stderr_tail","stdout_tail","env_errors","env_hint"};
// the log tails are added to blobs as stdout.log / stderr.log.
json Diagnostics(ssh::SshSession& session, const std::string& runtime_dir, TaskOutcome& blobs_out);

// Sleeps up to d in small steps; false when the task was cancelled meanwhile.
bool SleepUnlessCancelled(TaskContext& ctx, std::chrono::milliseconds d);

}  // namespace npuprof::workers::service
