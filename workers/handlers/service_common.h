// Helpers shared by the service.* handlers (launch, wait_ready, stop, watch):
// the session to the payload's machine, "~/" paths resolved on the target, the runtime dir check,
// the service's process group status on the target, log tails and the
// start-up diagnostics (stderr tail, known environment errors with a hint).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "workers/handlers/service_runtime_dir.h"
#include "workers/handlers/service_scripts.h"
#include "workers/remote.h"
#include "workers/task_outcome.h"

namespace npuprof::workers::service {

// A session to the payload's machine; `failure` is set when it could not be
// had (then nothing else is valid).
struct Call {
  ssh::SshTarget target;
  std::shared_ptr<ssh::SshSession> session;
  std::optional<TaskOutcome> failure;
};
Call Open(const tasks::Machine& machine, TaskContext& ctx);

// The SSH user's home on the target ($HOME of its login shell), looked up
// once per target (user@host:port) in this worker process and kept.
Result<std::string> RemoteHome(ssh::SshSession& session);

// path with a leading "~/" (or a bare "~") replaced by RemoteHome; any other
// path is returned as it is. "~user/..." is refused.
Result<std::string> ResolveRemotePath(ssh::SshSession& session, const std::string& path);

// The machine record's runtime base, resolved (default sm::kDefaultRuntimeBase).
Result<std::string> RuntimeBase(ssh::SshSession& session, const tasks::Machine& machine);

// Runs RuntimeDirArgv for dir (absolute): from the machine's runtime base
// down when dir is below it, else (a path of an older layout) from dir's
// parent. A refused dir is Status::Denied with the script's message
// (IsRuntimeDirRefusal); SSH failures keep their kind.
Result<RuntimeDirReport> InspectRuntimeDir(ssh::SshSession& session, const tasks::Machine& machine, const std::string& dir,
                                           bool create, const std::vector<std::string>& entries);

// InspectRuntimeDir in two halves, for a command that runs the check among
// other steps: the check's argv, and the report read from what it printed
// (its exit status and stderr: the refusal, a failure).
Result<std::vector<std::string>> InspectRuntimeDirArgv(ssh::SshSession& session, const tasks::Machine& machine,
                                                       const std::string& dir, bool create,
                                                       const std::vector<std::string>& entries);
Result<RuntimeDirReport> RuntimeDirReportOf(const ssh::ExecResult& run, const std::string& dir);

// True for InspectRuntimeDir's refusal (not an SSH failure).
bool IsRuntimeDirRefusal(const Status& s);

// An outcome for a failed remote step: SSH failures as OutcomeFromSsh;
// others (a check's own verdict) not retryable, kind invalid_input for a
// bad path or home, else remote_error.
TaskOutcome RemoteFailure(const Status& s, const ssh::SshTarget& target);

// Status of the service's process group led by pid on the target: only
// processes carrying the marker of the service in runtime_dir count
// (service_scripts.h). An invalid runtime dir is Status::Invalid.
Result<GroupStatus> QueryGroup(ssh::SshSession& session, int64_t pid, const std::string& runtime_dir);

// Sends signal to that process group when it is still the service's;
// the status seen just before (signalled says whether it was sent).
Result<GroupStatus> SignalGroup(ssh::SshSession& session, const std::string& signal, int64_t pid,
                                const std::string& runtime_dir);

// The last max_bytes of a remote file ("" when it does not exist).
Result<std::string> ReadTail(ssh::SshSession& session, const std::string& path, uint64_t max_bytes);

// Log diagnostics of a runtime dir: {"stderr_tail","stdout_tail","env_errors","env_hint"};
// the log tails are added to blobs as stdout.log / stderr.log.
json Diagnostics(ssh::SshSession& session, const std::string& runtime_dir, TaskOutcome& blobs_out);
// The same from tails already read (at most kServiceLogTailBytes each).
inline constexpr uint64_t kServiceLogTailBytes = uint64_t{1} << 20;
json DiagnosticsOf(const std::string& stderr_log, const std::string& stdout_log, TaskOutcome& blobs_out);

// Sleeps up to d in small steps; false when the task was cancelled meanwhile.
bool SleepUnlessCancelled(TaskContext& ctx, std::chrono::milliseconds d);

}  // namespace npuprof::workers::service
