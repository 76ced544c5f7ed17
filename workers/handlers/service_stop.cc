// service.stop: SIGINT to the service's process group, wait grace; SIGTERM,
// wait grace; SIGKILL only with force (at once with force and kill_at_once:
// an earlier attempt already sent SIGINT and SIGTERM). A service that is already gone (or was
// never started: never_started) is success. The log tails are kept as
// evidence.
//
// Only the service's own processes are signalled: before every signal the
// group's processes are checked for the service's marker (service_scripts.h).
// A pid that is alive without it was reused by another process: it counts as
// "already gone" for this service (not_ours says so) and is never signalled.
// The pid file is read only from a runtime dir the checks accept
// (service_runtime_dir.h).
#include <algorithm>

#include <fmt/format.h>

#include "workers/handlers/service_common.h"
#include "workers/poll_backoff.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers::service {

namespace {

// Reads <runtime>/pid; 0 when there is none. Waits up to 10 s when the start
// marker exists but the pid is not yet recorded.
Result<int64_t> PidFromRuntime(Call& c, const std::string& rt, TaskContext& ctx) {
  PollBackoff backoff(std::chrono::milliseconds(250));
  for (int i = 0; i < 40; ++i) {
    auto text = c.session->ReadFile(rt + "/pid", 0, 64);
    if (text.ok() && std::atoll(text->c_str()) > 0) return static_cast<int64_t>(std::atoll(text->c_str()));
    if (!text.ok() && ssh::ErrorKindOf(text.status()) != ssh::SshErrorKind::kRemoteError) return text.status();
    auto marker = c.session->Stat(rt + "/.started");
    if (!marker.ok()) {
      if (ssh::ErrorKindOf(marker.status()) == ssh::SshErrorKind::kRemoteError) return int64_t{0};
      return marker.status();
    }
    if (!SleepUnlessCancelled(ctx, backoff.Next())) return int64_t{0};
  }
  return int64_t{0};
}

// Waits until the group is gone or grace passes; true when gone. The wait
// runs on the target in slices of at most 1 s (workers/remote_wait.h), so
// the exit is seen within ~50 ms; after a slice without it, the group is
// checked with the marker (a foreign process in the group does not keep the
// service "alive").
Result<bool> WaitGone(Call& c, int64_t pid, int64_t grace_ms, TaskContext& ctx, const std::string& after,
                      const std::string& rt) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() > 0) {
      auto w = RunRemoteWait(*c.session, GroupGoneCheck(pid), std::min(left, std::chrono::milliseconds(1000)));
      if (!w.ok()) return w.status();
      if (w->signalled) return true;
    }
    auto st = QueryGroup(*c.session, pid, rt);
    if (!st.ok()) return st.status();
    if (!st->any_alive()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    ctx.progress(fmt::format("waiting for pid {} to exit after {} ({} process(es) left)", pid, after, st->members));
    if (ctx.cancelled.load()) return false;
  }
}

}  // namespace

TaskOutcome Stop(const tasks::ServiceStop& p, const proto::Task&, TaskContext& ctx) {
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  const bool force = p.force();
  const int64_t grace_ms = std::clamp<int64_t>(p.grace_s(), 0, 3600) * 1000;
  int64_t pid = p.pid();
  auto resolved = ResolveRemotePath(*c.session, p.runtime_dir());
  if (!resolved.ok()) return RemoteFailure(resolved.status(), c.target);
  const std::string rt = *resolved;
  if (!ServiceMarker(rt).ok())
    return TaskOutcome::Failure("bad_payload", "service.stop needs the service's runtime_dir (<base>/<run>/service-<n>)",
                                false);

  TaskOutcome out;
  json signals = json::array();
  bool dir_readable = false;
  auto finish_ok = [&](bool already_gone) {
    if (dir_readable) {
      TaskOutcome logs;
      json d = Diagnostics(*c.session, rt, logs);
      out.blobs = std::move(logs.blobs);
      out.result["stderr_tail"] = d["stderr_tail"];
    }
    out.ok = true;
    out.result.update(json{{"stopped", true}, {"already_gone", already_gone}, {"signals", signals}, {"pid", pid},
                           {"force", force}, {"runtime_dir", rt}});
    return out;
  };

  auto dir = InspectRuntimeDir(*c.session, p.machine(), rt, /*create=*/false, {"pid", ".started"});
  if (!dir.ok()) {
    if (!IsRuntimeDirRefusal(dir.status())) return RemoteFailure(dir.status(), c.target);
    if (pid <= 0)
      return TaskOutcome::Failure("unsafe_runtime_dir",
                                  dir.status().message() + " — its pid file is not read; stop the service by hand",
                                  false);
    out.result["runtime_dir_refused"] = dir.status().message();  // the known pid is still checked and stopped
  } else if (!dir->exists || dir->Entry(".started").type == "absent") {
    if (pid <= 0) {
      out.result["never_started"] = true;
      out.result["note"] = fmt::format("{} has no start marker: the service was never launched", rt);
      return finish_ok(true);
    }
  } else {
    dir_readable = true;
    if (pid <= 0) {
      if (auto why = UntrustedFile(*dir, rt, "pid", "the service's pid file"))
        return TaskOutcome::Failure("untrusted_runtime", *why, false);
      auto found = PidFromRuntime(c, rt, ctx);
      if (!found.ok()) return RemoteFailure(found.status(), c.target);
      pid = *found;
    }
  }
  if (pid <= 0) return finish_ok(true);
  auto not_ours = [&](const GroupStatus& st) {
    if (st.leader_foreign)
      out.result["not_ours"] = fmt::format(
          "pid {} is alive but carries no NPUPROF_SERVICE marker of this service: its pid was reused by another "
          "process, which was not signalled",
          pid);
  };
  // No separate look first: SignalGroup checks the group with the marker and
  // signals only when something of the service is alive (signalled=no: gone).
  std::vector<std::pair<std::string, int64_t>> steps = {{"INT", grace_ms}, {"TERM", grace_ms}};
  if (force) steps.emplace_back("KILL", 5000);
  // kill_at_once: an earlier stop of this service already sent SIGINT and
  // SIGTERM and waited out their graces (only with force).
  if (force && p.kill_at_once()) steps = {{"KILL", 5000}};
  for (const auto& [sig, wait_ms] : steps) {
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "stop cancelled", false);
    auto sent = SignalGroup(*c.session, sig, pid, rt);
    if (!sent.ok()) return RemoteFailure(sent.status(), c.target);
    if (!sent->signalled) {  // gone (or no longer ours) since the last look
      not_ours(*sent);
      return finish_ok(signals.empty());
    }
    signals.push_back("SIG" + sig);
    auto gone = WaitGone(c, pid, wait_ms, ctx, "SIG" + sig, rt);
    if (!gone.ok()) return RemoteFailure(gone.status(), c.target);
    if (*gone) return finish_ok(false);
  }
  out = TaskOutcome::Failure(
      "still_running",
      force ? fmt::format("pid {} (process group) survived SIGINT, SIGTERM and SIGKILL", pid)
            : fmt::format("pid {} is still running after SIGINT and SIGTERM ({} s grace each): stop it with "
                          "`npuprof stop RUN --force` (SIGKILL)",
                          pid, grace_ms / 1000),
      false);
  out.result = {{"stopped", false}, {"signals", signals}, {"pid", pid}, {"force", force}};
  return out;
}

}  // namespace npuprof::workers::service
