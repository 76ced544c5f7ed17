#include "workers/handlers/service_common.h"

#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "parsers/vllm_log_parser.h"
#include "workers/log_tails.h"
#include "workers/ssh/shell_quote.h"
#include "statemachine/service_spec.h"

namespace npuprof::workers::service {

Call Open(const tasks::Machine& machine, TaskContext& ctx) {
  Call c;
  auto target = TargetFromMachine(machine);
  if (!target.ok()) {
    c.failure = TaskOutcome::Failure("bad_payload", target.status().message(), false);
    return c;
  }
  c.target = *target;
  c.session = ctx.pool.Get(c.target);
  return c;
}

Result<std::string> RemoteHome(ssh::SshSession& session) {
  static std::mutex mu;
  static std::map<std::string, std::string> homes;
  const std::string key = session.target().Endpoint();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = homes.find(key); it != homes.end()) return it->second;
  }
  auto r = RunRemote(session, {"sh", "-c", "printf '%s' \"$HOME\""}, std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  const std::string home = r->stdout_data;
  const bool ok = r->exit_status == 0 && !home.empty() && home[0] == '/' && home.size() < 4096 &&
                  home.find_first_of(std::string("\n\r\0", 3)) == std::string::npos;
  if (!ok)
    return Status::Precondition(fmt::format(
        "the home of {} on the target is not an absolute path (HOME='{}'): add the machine with --runtime-base "
        "/abs/dir instead of a ~/ path",
        key, home.substr(0, 200)));
  std::lock_guard<std::mutex> lock(mu);
  homes[key] = home;
  return home;
}

Result<std::string> ResolveRemotePath(ssh::SshSession& session, const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  if (path.size() > 1 && path[1] != '/')
    return Status::Invalid("'" + path + "': only ~/ (the SSH user's own home) is understood, not ~user");
  auto home = RemoteHome(session);
  if (!home.ok()) return home.status();
  std::string h = *home;
  while (h.size() > 1 && h.back() == '/') h.pop_back();
  return h + path.substr(1);
}

Result<std::string> RuntimeBase(ssh::SshSession& session, const tasks::Machine& machine) {
  auto resolved = ResolveRemotePath(session, sm::RuntimeBaseOf(machine.runtime_base()));
  if (!resolved.ok()) return resolved.status();
  std::string b = *resolved;
  while (b.size() > 1 && b.back() == '/') b.pop_back();
  return b;
}

Result<std::vector<std::string>> InspectRuntimeDirArgv(ssh::SshSession& session, const tasks::Machine& machine,
                                                       const std::string& dir, bool create,
                                                       const std::vector<std::string>& entries) {
  auto resolved = RuntimeBase(session, machine);
  if (!resolved.ok()) return resolved.status();
  std::string base = *resolved;
  auto below = ComponentsBelow(base, dir);
  if (!below.ok() && dir.size() > 1 && dir[0] == '/' && dir.rfind('/') > 0) {
    base = dir.substr(0, dir.rfind('/'));
    below = ComponentsBelow(base, dir);
  }
  if (!below.ok()) return below.status();
  return RuntimeDirArgv(create, base, *below, entries);
}

Result<RuntimeDirReport> InspectRuntimeDir(ssh::SshSession& session, const tasks::Machine& machine, const std::string& dir,
                                           bool create, const std::vector<std::string>& entries) {
  auto argv = InspectRuntimeDirArgv(session, machine, dir, create, entries);
  if (!argv.ok()) return argv.status();
  auto r = RunRemote(session, *argv, std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  return RuntimeDirReportOf(*r, dir);
}

Result<RuntimeDirReport> RuntimeDirReportOf(const ssh::ExecResult& run, const std::string& dir) {
  const ssh::ExecResult* r = &run;
  if (auto refused = RuntimeDirRefusal(r->stderr_data)) return Status::Denied(*refused);
  if (r->exit_status != 0)
    return Status::Io(fmt::format("checking the runtime dir {} failed (it {}): {}", dir, ExitText(*r),
                                  TailLines(r->stderr_data, 3)));
  return ParseRuntimeDirReport(r->stdout_data);
}

bool IsRuntimeDirRefusal(const Status& s) {
  return s.code() == Code::kPermissionDenied && ssh::ErrorKindOf(s) == ssh::SshErrorKind::kNone;
}

TaskOutcome RemoteFailure(const Status& s, const ssh::SshTarget& target) {
  if (ssh::ErrorKindOf(s) != ssh::SshErrorKind::kNone) return OutcomeFromSsh(s, target);
  const bool input = s.code() == Code::kInvalidArgument || s.code() == Code::kFailedPrecondition;
  return TaskOutcome::Failure(input ? "invalid_input" : "remote_error", s.message(), false);
}

namespace {

Result<GroupStatus> RunGroupScript(ssh::SshSession& session, const std::string& action, int64_t pid,
                                   const std::string& runtime_dir) {
  auto marker = ServiceMarker(runtime_dir);
  if (!marker.ok()) return marker.status();
  auto argv = action == "status" ? GroupStatusArgv(pid, *marker, runtime_dir)
                                 : SignalGroupArgv(action, pid, *marker, runtime_dir);
  auto r = RunRemote(session, argv, std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  if (r->exit_status != 0)
    return Status::Io("process status check failed on the target: " + TailLines(r->stderr_data, 3));
  return ParseGroupStatus(r->stdout_data);
}

}  // namespace

Result<GroupStatus> QueryGroup(ssh::SshSession& session, int64_t pid, const std::string& runtime_dir) {
  return RunGroupScript(session, "status", pid, runtime_dir);
}

Result<GroupStatus> SignalGroup(ssh::SshSession& session, const std::string& signal, int64_t pid,
                                const std::string& runtime_dir) {
  return RunGroupScript(session, signal, pid, runtime_dir);
}

Result<std::string> ReadTail(ssh::SshSession& session, const std::string& path, uint64_t max_bytes) {
  auto st = session.Stat(path);
  if (!st.ok()) {
    if (ssh::ErrorKindOf(st.status()) == ssh::SshErrorKind::kRemoteError) return std::string();
    return st.status();
  }
  const uint64_t off = st->size > max_bytes ? st->size - max_bytes : 0;
  return session.ReadFile(path, off, max_bytes);
}

namespace {

// The service's stderr.log and stdout.log tails: one remote command
// (log_tails.h); where that cannot be used, each file read on its own.
std::pair<std::string, std::string> ServiceLogTails(ssh::SshSession& session, const std::string& rt) {
  constexpr uint64_t kMax = kServiceLogTailBytes;
  const std::vector<std::string> paths = {rt + "/stderr.log", rt + "/stdout.log"};
  auto r = session.Exec(ssh::BuildCommand(LogTailsArgv(kMax, paths)), std::chrono::seconds(30), {},
                        LogTailsOutputCap(kMax, paths.size()));
  if (r.ok() && r->exit_status == 0 && !r->stdout_omitted) {
    auto tails = ParseLogTails(r->stdout_data, paths.size(), kMax);
    if (tails.ok()) return {(*tails)[0], (*tails)[1]};
    spdlog::debug("log tails in {}: {}; reading the files one by one", rt, tails.status().ToString());
  } else {
    spdlog::debug("log tails in {}: {}; reading the files one by one", rt,
                  r.ok() ? ExitText(*r) + ": " + TailLines(r->stderr_data, 2) : r.status().ToString());
  }
  auto err = ReadTail(session, paths[0], kMax);
  auto std_out = ReadTail(session, paths[1], kMax);
  return {err.ok() ? *err : "", std_out.ok() ? *std_out : ""};
}

}  // namespace

json Diagnostics(ssh::SshSession& session, const std::string& rt, TaskOutcome& out) {
  const auto [e, o] = ServiceLogTails(session, rt);
  return DiagnosticsOf(e, o, out);
}

json DiagnosticsOf(const std::string& e, const std::string& o, TaskOutcome& out) {
  json d = json::object();
  if (!e.empty()) out.blobs.emplace_back("stderr.log", e);
  if (!o.empty()) out.blobs.emplace_back("stdout.log", o);
  d["stderr_tail"] = TailLines(e, 30);
  d["stdout_tail"] = TailLines(o, 15);
  const parsers::VllmLogSummary summary = parsers::ParseVllmLog(o + "\n" + e);
  json errs = json::array();
  for (const auto& x : summary.env_errors) errs.push_back({{"kind", x.kind}, {"text", x.text}});
  d["env_errors"] = errs;
  d["env_hint"] = parsers::EnvErrorHint(summary.env_errors);
  return d;
}

bool SleepUnlessCancelled(TaskContext& ctx, std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
    if (ctx.cancelled.load()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(50),
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()) +
            std::chrono::milliseconds(1)));
  }
  return !ctx.cancelled.load();
}

}  // namespace npuprof::workers::service
