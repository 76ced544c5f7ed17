// Helpers every task handler uses to reach a machine: the machine record (as
// stored in the inventory) turned into an SshTarget, remote commands built
// from argv with the one quoting routine, and SSH failures turned into task
// outcomes with a clear kind and retry verdict.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "task_payloads.pb.h"
#include "workers/profiling/target_interpreter.h"
#include "workers/ssh/ssh_pool.h"
#include "workers/ssh/ssh_session.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

// The machine record of a task payload (port 0 = 22); a record without host
// or user is Status::Invalid.
Result<ssh::SshTarget> TargetFromMachine(const tasks::Machine& machine);
// The name the machine was added under, or its host when the record has none.
std::string MachineName(const tasks::Machine& machine);

// Runs argv on the machine after sourcing its env script (if any). A
// script that fails to source is an error of kind env_script_failed that
// names it, its status and its stderr (env_script_protocol.h), never a
// command run without its environment.
Result<ssh::ExecResult> RunRemote(ssh::SshSession& session, const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout,
                                  const std::vector<std::pair<std::string, std::string>>& env = {});

// RunRemote starts every on-target Python program with the machine's
// resolved interpreter (profiling/interpreter_command.h): an argv that
// starts Python (argv[0] "python3", or a script spelling
// "${NPUPROF_PYTHON:-python3}") is wrapped so that NPUPROF_PYTHON holds the
// interpreter this worker resolved for the machine (WorkerInterpreters(),
// key InterpreterKey(endpoint, env script)), learned on the first such
// command on the machine from python3 itself in the same round trip. A
// cached path that is no longer executable is forgotten within the command
// (it resolves again); a python3 argv whose cached path did not start
// (126/127, nothing on stdout) is forgotten and run once more: the cache
// never fails a task. The wrapper's stderr lines are removed.
//
// RunWithInterpreter is that step for callers that run the command another
// way (their own Exec, stdin, output cap): `run` gets the wrapped argv and
// runs it after the machine's env script as RunRemote would.
Result<ssh::ExecResult> RunWithInterpreter(
    ssh::SshSession& session, const std::vector<std::string>& argv,
    const std::function<Result<ssh::ExecResult>(const std::vector<std::string>& wrapped)>& run);
// The same with the cache and key given (tests).
Result<ssh::ExecResult> RunWithInterpreterIn(
    profiling::TargetInterpreters& cache, const std::string& key, const std::vector<std::string>& argv,
    const std::function<Result<ssh::ExecResult>(const std::vector<std::string>& wrapped)>& run);

// How a remote command ended, for messages: "exited 3", or "timed out after
// 60 s (stopped)" when it ran past its timeout (exit_status is then -1),
// or "was killed by a signal" for -1 without a timeout.
std::string ExitText(const ssh::ExecResult& r);

// For a message about a tool that is not found: when the machine's env
// script (which would put the tool on PATH) does not exist on the target,
// "; the machine's env script '<path>' does not exist on <endpoint>: fix
// its --env-script (npuprof machine add)", else "" (no env script, or it
// exists, or the check could not run). One remote `test -f`.
std::string EnvScriptHint(ssh::SshSession& session);

// Maps an SSH-layer failure to an outcome: unreachable / timeout /
// connection_lost / channel_failed are retryable; the permanent kinds
// (ssh::IsPermanent: auth, host key, subsystem refused, missing tool, invalid
// input) and remote file errors are not, and their message names the fix.
TaskOutcome OutcomeFromSsh(const Status& st, const ssh::SshTarget& target);

// Adds {"host_key_accepted": {...}} to result the first time this process
// sees an accept-new acceptance on the session (the broker records it).
void NoteHostKeyAcceptance(ssh::SshSession& session, const tasks::Machine& machine, json& result);

// How long one `npu-smi info` may take before it is stopped and its task
// fails saying it timed out: well inside the 60 s lease of the tasks that
// run it (statemachine/task_policies.cc), so the answer reaches the broker
// before the lease would call the attempt lost and start another.
// A machine's own bound (`machine add --npu-smi-timeout`, at most 50 s)
// replaces it.
inline constexpr std::chrono::seconds kNpuSmiTimeout{45};
inline std::chrono::seconds NpuSmiTimeout(const tasks::Machine& machine) {
  const int32_t s = machine.npu_smi_timeout_s();
  return s > 0 && s <= 50 ? std::chrono::seconds(s) : kNpuSmiTimeout;
}

// Caps on reads of remote logs (docs/RELIABILITY.md, "Caps").
inline constexpr uint64_t kLogReadCap = uint64_t{32} << 20;  // a log read as evidence (ReadHeadTail)
inline constexpr size_t kShownTailMaxBytes = 8 << 10;        // what TailLines returns at most

// The file whole when it has at most `cap` bytes; else its first cap/2 and
// last cap/2 bytes with ssh::OmittedMarker between (start-up lines and the
// final error both survive). Errors are the session's (kRemoteError +
// kNotFound when there is no such file).
Result<std::string> ReadHeadTail(ssh::SshSession& session, const std::string& path, uint64_t cap);
// Several files read as ReadHeadTail reads each, in one remote command
// (workers/log_tails.h: one round trip instead of a stat, an open, the reads
// and a close per file); where that command cannot be used, one by one. A
// file that is missing or unreadable is an error of kind remote_error, as
// ReadHeadTail gives.
std::vector<Result<std::string>> ReadHeadTails(ssh::SshSession& session, const std::vector<std::string>& paths,
                                               uint64_t cap);

// The last n lines of remote text, as text for people: at most
// kShownTailMaxBytes (the end kept, "…" in front when cut) and valid UTF-8
// (common/utf8.h). Not for evidence: blobs keep the bytes themselves.
std::string TailLines(const std::string& text, int n);

}  // namespace npuprof::workers
