#include "workers/remote.h"

#include <mutex>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/utf8.h"
#include "workers/log_tails.h"
#include "workers/profiling/interpreter_command.h"
#include "workers/profiling/target_interpreter.h"
#include "workers/ssh/env_script_protocol.h"
#include "workers/ssh/output_cap.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::workers {

Result<ssh::SshTarget> TargetFromMachine(const tasks::Machine& m) {
  ssh::SshTarget t;
  t.host = m.host();
  t.port = m.port() != 0 ? m.port() : 22;
  t.user = m.user();
  t.identity_file = m.identity_file();
  t.known_hosts_file = m.known_hosts_file();
  t.env_script = m.env_script();
  t.host_key_policy = m.accept_new_host_key() ? ssh::HostKeyPolicy::kAcceptNew : ssh::HostKeyPolicy::kStrict;
  if (t.host.empty() || t.user.empty()) return Status::Invalid("machine record lacks host or user");
  if (m.port() < 0 || m.port() > 65535) return Status::Invalid(fmt::format("machine record's port {} is not a TCP port", m.port()));
  return t;
}

std::string MachineName(const tasks::Machine& machine) { return machine.name().empty() ? machine.host() : machine.name(); }

namespace {

Result<ssh::ExecResult> RunRemoteAsIs(ssh::SshSession& session, const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout,
                                      const std::vector<std::pair<std::string, std::string>>& env) {
  auto script = ssh::BuildRemoteScriptChecked(session.target().env_script, env, argv);
  if (!script.ok()) return script.status();
  Result<ssh::ExecResult> r = session.Exec(*script, timeout);
  // On a channel of its own the command's prefix sourced the script, and
  // says on stderr when that failed (the command shell's driver fails the
  // Exec itself).
  if (r.ok() && r->exit_status != 0 && !session.target().env_script.empty()) {
    if (auto failed = ssh::FindEnvScriptFailureInStderr(r->stderr_data))
      return Status::Precondition(
          fmt::format("{}: {}", ssh::SshErrorKindName(ssh::SshErrorKind::kEnvScriptFailed),
                      ssh::DescribeEnvScriptFailure(*failed, session.target().env_script, session.target().Endpoint())));
  }
  return r;
}

}  // namespace

Result<ssh::ExecResult> RunRemote(ssh::SshSession& session, const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout,
                                  const std::vector<std::pair<std::string, std::string>>& env) {
  if (!profiling::StartsPython(argv)) return RunRemoteAsIs(session, argv, timeout, env);
  return RunWithInterpreter(
      session, argv, [&](const std::vector<std::string>& wrapped) { return RunRemoteAsIs(session, wrapped, timeout, env); });
}

Result<ssh::ExecResult> RunWithInterpreter(
    ssh::SshSession& session, const std::vector<std::string>& argv,
    const std::function<Result<ssh::ExecResult>(const std::vector<std::string>& wrapped)>& run) {
  return RunWithInterpreterIn(profiling::WorkerInterpreters(),
                              profiling::InterpreterKey(session.target().Endpoint(), session.target().env_script),
                              argv, run);
}

Result<ssh::ExecResult> RunWithInterpreterIn(
    profiling::TargetInterpreters& cache, const std::string& key, const std::vector<std::string>& argv,
    const std::function<Result<ssh::ExecResult>(const std::vector<std::string>& wrapped)>& run) {
  if (argv.empty()) return run(argv);
  std::optional<std::string> cached = cache.Get(key);
  Result<ssh::ExecResult> r = run(profiling::InterpreterArgv(argv, cached));
  bool again = false;
  if (r.ok()) {
    const profiling::InterpreterNews news = profiling::TakeInterpreterNews(&r->stderr_data);
    if (news.gone && cached) cache.Forget(key, *cached);
    if (news.resolved) {
      cache.Put(key, *news.resolved);
    } else if (cached && !news.gone && argv[0] == profiling::kDefaultInterpreter &&
               profiling::InterpreterDidNotStart(r->exit_status, r->stdout_data)) {
      // An executable file that no longer starts: nothing ran; forget it
      // and run once more as python3 (which asks again).
      spdlog::info("the interpreter {} resolved for {} did not start (exit {}); asking python3 again", *cached, key,
                   r->exit_status);
      cache.Forget(key, *cached);
      again = true;
    }
  }
  if (!again) return r;
  r = run(profiling::InterpreterArgv(argv, std::nullopt));
  if (r.ok()) {
    const profiling::InterpreterNews news = profiling::TakeInterpreterNews(&r->stderr_data);
    if (news.resolved) cache.Put(key, *news.resolved);
  }
  return r;
}

std::string ExitText(const ssh::ExecResult& r) {
  if (r.timed_out) {
    const auto ms = r.timeout.count();
    return ms % 1000 == 0 ? fmt::format("timed out after {} s (stopped)", ms / 1000)
                          : fmt::format("timed out after {:.1f} s (stopped)", static_cast<double>(ms) / 1000.0);
  }
  if (r.exit_status < 0) return "was killed by a signal";
  return fmt::format("exited {}", r.exit_status);
}

std::string EnvScriptHint(ssh::SshSession& session) {
  const std::string& env = session.target().env_script;
  if (env.empty()) return "";
  auto r = session.Exec(ssh::BuildCommand({"test", "-f", env}), std::chrono::seconds(10));
  if (!r.ok() || r->exit_status != 1) return "";
  return fmt::format("; the machine's env script '{}' does not exist on {}: fix its --env-script (npuprof machine "
                     "add)",
                     env, session.target().Endpoint());
}

TaskOutcome OutcomeFromSsh(const Status& st, const ssh::SshTarget& target) {
  const ssh::SshErrorKind kind = ssh::ErrorKindOf(st);
  std::string name = ssh::SshErrorKindName(kind);
  bool retryable = false;
  std::string fix;
  switch (kind) {
    case ssh::SshErrorKind::kUnreachable:
      retryable = true;
      fix = "check that the machine is up and sshd listens on that port";
      break;
    case ssh::SshErrorKind::kTimeout:
    case ssh::SshErrorKind::kConnectionLost:
    case ssh::SshErrorKind::kChannelFailed:
      retryable = true;
      break;
    case ssh::SshErrorKind::kAuthFailed:
      fix = "check --user and --identity (the key must be in the remote authorized_keys)";
      break;
    case ssh::SshErrorKind::kHostKeyUnknown:
      fix = "add the host key to the known_hosts file, or re-add the machine with --accept-new-host-key";
      break;
    case ssh::SshErrorKind::kHostKeyMismatch:
      fix = "the host key changed: verify the machine, then fix the known_hosts entry";
      break;
    case ssh::SshErrorKind::kSubsystemRefused:
      fix = "enable the sftp subsystem in the target's sshd_config (Subsystem sftp internal-sftp)";
      break;
    case ssh::SshErrorKind::kToolMissing:
      fix = "install the missing tool on the target or put it on the SSH user's PATH";
      break;
    case ssh::SshErrorKind::kEnvScriptFailed:
      fix = "fix the script, or point the machine at another one (npuprof machine add NAME ... --env-script PATH)";
      break;
    case ssh::SshErrorKind::kRemoteDiskFull:
      fix = "free space on the target's file system, then retry";
      break;
    default:
      break;
  }
  retryable = retryable && !ssh::IsPermanent(kind);
  std::string detail = st.message();
  const std::string prefix = name + ": ";
  if (detail.rfind(prefix, 0) == 0) detail = detail.substr(prefix.size());
  std::string msg = fmt::format("{} ({})", detail, target.Endpoint());
  if (!fix.empty()) msg += ": " + fix;
  return TaskOutcome::Failure(name, msg, retryable);
}

Result<std::string> ReadHeadTail(ssh::SshSession& session, const std::string& path, uint64_t cap) {
  auto st = session.Stat(path);
  if (!st.ok()) return st.status();
  if (st->size <= cap) return session.ReadFile(path, 0, cap);
  const uint64_t head_bytes = cap / 2, tail_bytes = cap - cap / 2;
  auto head = session.ReadFile(path, 0, head_bytes);
  if (!head.ok()) return head.status();
  auto tail = session.ReadFile(path, st->size - tail_bytes, tail_bytes);
  if (!tail.ok()) return tail.status();
  return *head + ssh::OmittedMarker(st->size - head_bytes - tail_bytes) + *tail;
}

std::vector<Result<std::string>> ReadHeadTails(ssh::SshSession& session, const std::vector<std::string>& paths,
                                               uint64_t cap) {
  std::vector<Result<std::string>> got;
  auto r = session.Exec(ssh::BuildCommand(HeadTailsArgv(cap, paths)), std::chrono::seconds(120), {},
                        HeadTailsOutputCap(cap, paths.size()));
  if (r.ok() && r->exit_status == 0 && r->stdout_omitted == 0) {
    auto parsed = ParseHeadTails(r->stdout_data, paths.size(), cap);
    if (parsed.ok()) {
      for (size_t i = 0; i < paths.size(); ++i) {
        HeadTail& h = (*parsed)[i];
        if (!h.found) {
          got.emplace_back(Status::NotFound(fmt::format("{}: {}: no such file, or not readable",
                                                        ssh::SshErrorKindName(ssh::SshErrorKind::kRemoteError),
                                                        paths[i])));
        } else if (h.tail.empty()) {
          got.emplace_back(std::move(h.head));
        } else {
          const uint64_t omitted = h.size > h.head.size() + h.tail.size() ? h.size - h.head.size() - h.tail.size() : 0;
          got.emplace_back(h.head + ssh::OmittedMarker(omitted) + h.tail);
        }
      }
      return got;
    }
    spdlog::debug("reading {} file(s) at once: {}; one by one", paths.size(), parsed.status().ToString());
  }
  for (const auto& p : paths) got.push_back(ReadHeadTail(session, p, cap));
  return got;
}

void NoteHostKeyAcceptance(ssh::SshSession& session, const tasks::Machine& machine, json& result) {
  static std::mutex mu;
  static std::set<std::string> reported;
  auto fp = session.accepted_new_fingerprint();
  if (!fp) return;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = session.target().Endpoint() + " " + *fp;
  if (!reported.insert(key).second) return;
  result["host_key_accepted"] = {{"machine", machine.name()}, {"fingerprint", *fp}};
}

std::string TailLines(const std::string& text, int n) {
  size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n')) --pos;
  int lines = 0;
  size_t i = pos;
  while (i > 0) {
    if (text[i - 1] == '\n' && ++lines == n) break;
    --i;
  }
  std::string_view tail(text.data() + i, pos - i);
  if (tail.size() <= kShownTailMaxBytes) return ToValidUtf8(tail);
  tail.remove_prefix(tail.size() - kShownTailMaxBytes);
  // Start at a character: skip the continuation bytes of one cut in two.
  for (int k = 0; k < 3 && !tail.empty() && (static_cast<unsigned char>(tail.front()) & 0xC0) == 0x80; ++k) {
    tail.remove_prefix(1);
  }
  return "…" + ToValidUtf8(tail);
}

}  // namespace npuprof::workers
