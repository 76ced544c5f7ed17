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
//
// With the payload's then_flush (memory-profile, one node), a stop that
// found the service gone (signalled or already gone; not forced) runs the
// flush wait next, in this task (memory.wait_flush's handler: read-only, so
// a re-delivered stop reads the same), and answers it as `flushed`; a wait
// that does not succeed is left out, for the run to schedule as its own task.
//
// Far targets: the check, the signals, the waits and the log tails run first
// as one remote command (stop_in_one.h, at most 10 s of waiting); what it
// did is replayed through the decisions below, and what it left (the rest
// of a grace, later signals) is taken step by step.
//
// The stop runs on a session lent to it alone (SshPool::Acquire): its
// command waits on the target for up to 10 s, and the run lists the profile
// dirs of the same node beside it (torch-profile), so on the worker's shared
// session one would wait behind the other: the listing (the run's critical
// path) behind the whole stop, or the stop's first signal behind the
// listing (issue 37).
#include <algorithm>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "workers/handlers/service_common.h"
#include "workers/handlers/stop_in_one.h"
#include "workers/log_tails.h"
#include "workers/memory/memory_tasks.h"
#include "workers/poll_backoff.h"
#include "workers/profiling/target_interpreter.h"
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

// How long the one-command stop may wait on the target before it hands the
// rest to the step-by-step ladder (whose slices observe cancellation).
constexpr std::chrono::milliseconds kFoldBudget{10000};

// The runtime dir's report, from the one-command stop (stop_in_one.h) when
// it ran and its output could be read (then `fold` is set), else from the
// check alone.
Result<RuntimeDirReport> FoldedStop(Call& c, const tasks::ServiceStop& p, const std::string& rt,
                                    const std::string& marker, int64_t pid, const std::vector<StopStep>& steps,
                                    std::optional<StopFold>& fold, std::string& fold_stderr) {
  const std::vector<std::string> entries = {"pid", ".started"};
  auto check = InspectRuntimeDirArgv(*c.session, p.machine(), rt, /*create=*/false, entries);
  if (!check.ok()) return check.status();
  // The exit wait starts Python: asked only where this worker already knows
  // the machine's interpreter, so that no interpreter is resolved before the
  // first signal (stop_in_one.h).
  const bool exit_wait = profiling::WorkerInterpreters()
                             .Get(profiling::InterpreterKey(c.session->target().Endpoint(),
                                                            c.session->target().env_script))
                             .has_value();
  auto r = RunRemote(*c.session,
                     StopInOneArgv(*check, pid, marker, rt, steps, kFoldBudget, kServiceLogTailBytes, exit_wait),
                     kFoldBudget + std::chrono::seconds(60));
  if (!r.ok()) return r.status();
  auto parsed = r->stdout_omitted == 0 ? ParseStopInOne(r->stdout_data, steps)
                                       : Result<StopFold>(Status::Corruption("its output was cut"));
  if (!parsed.ok()) {
    spdlog::debug("stopping in {} in one command: {} ({}); taking the steps one by one", rt,
                  parsed.status().message(), ExitText(*r));
    return InspectRuntimeDir(*c.session, p.machine(), rt, /*create=*/false, entries);
  }
  fold = std::move(*parsed);
  fold_stderr = r->stderr_data;
  ssh::ExecResult check_run = *r;
  check_run.exit_status = fold->dir_exit;
  check_run.stdout_data = fold->dir_report;
  return RuntimeDirReportOf(check_run, rt);
}

}  // namespace

TaskOutcome Stop(const tasks::ServiceStop& p, const proto::Task& task, TaskContext& ctx) {
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  c.session.reset();  // not held while asking: Acquire lends only a session nobody holds
  c.session = ctx.pool.Acquire(c.target);
  const bool force = p.force();
  const int64_t grace_ms = std::clamp<int64_t>(p.grace_s(), 0, 3600) * 1000;
  int64_t pid = p.pid();
  auto resolved = ResolveRemotePath(*c.session, p.runtime_dir());
  if (!resolved.ok()) return RemoteFailure(resolved.status(), c.target);
  const std::string rt = *resolved;
  if (!ServiceMarker(rt).ok())
    return TaskOutcome::Failure("bad_payload", "service.stop needs the service's runtime_dir (<base>/<run>/service-<n>)",
                                false);

  const std::string marker = *ServiceMarker(rt);
  std::vector<StopStep> steps = {{"INT", grace_ms}, {"TERM", grace_ms}};
  if (force) steps.push_back({"KILL", 5000});
  // kill_at_once: an earlier stop of this service already sent SIGINT and
  // SIGTERM and waited out their graces (only with force).
  if (force && p.kill_at_once()) steps = {{"KILL", 5000}};

  // The steps below, taken on the target in one command as far as they need
  // no decision from here (stop_in_one.h); what it did is replayed through
  // the same decisions, and the rest is taken step by step.
  std::optional<StopFold> fold;
  std::string fold_stderr;
  auto dir = FoldedStop(c, p, rt, marker, pid, steps, fold, fold_stderr);
  bool replay = fold.has_value();

  TaskOutcome out;
  json signals = json::array();
  bool dir_readable = false;
  auto finish_ok = [&](bool already_gone) {
    if (dir_readable) {
      TaskOutcome logs;
      json d;
      std::optional<Result<std::vector<std::string>>> folded_tails;
      if (replay && fold->tails) folded_tails = ParseLogTails(*fold->tails, 2, kServiceLogTailBytes);
      if (folded_tails && folded_tails->ok()) d = DiagnosticsOf((**folded_tails)[0], (**folded_tails)[1], logs);
      else d = Diagnostics(*c.session, rt, logs);
      out.blobs = std::move(logs.blobs);
      out.result["stderr_tail"] = d["stderr_tail"];
    }
    out.ok = true;
    out.result.update(json{{"stopped", true}, {"already_gone", already_gone}, {"signals", signals}, {"pid", pid},
                           {"force", force}, {"runtime_dir", rt}});
    if (p.has_then_flush() && !force) {
      tasks::MemoryWaitFlush then = p.then_flush();
      if (!then.has_machine()) *then.mutable_machine() = p.machine();  // the stop's (the run's, filled at scheduling)
      TaskOutcome flushed = MemWaitFlush(then, task, ctx);
      if (flushed.ok) {
        out.result["flushed"] = std::move(flushed.result);
        for (auto& b : flushed.blobs) out.blobs.push_back(std::move(b));
      } else {
        spdlog::info("the flush wait after the stop in {}: {}: {}; left to its own task", rt, flushed.error_kind,
                     flushed.error);
      }
    }
    return out;
  };

  if (!dir.ok()) {
    // The one command may have signalled the known pid before its check
    // (stop_in_one.h): then a check that failed does not end the stop (a
    // retry would signal again); the ladder goes on from that signal.
    const bool signalled = replay && !fold->steps.empty();
    const bool refused = IsRuntimeDirRefusal(dir.status());
    if (!refused && !signalled) return RemoteFailure(dir.status(), c.target);
    if (pid <= 0)
      return TaskOutcome::Failure("unsafe_runtime_dir",
                                  dir.status().message() + " — its pid file is not read; stop the service by hand",
                                  false);
    // the known pid is still checked and stopped
    out.result["runtime_dir_refused"] =
        refused ? dir.status().message() : "the runtime dir's check failed: " + dir.status().message();
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
  // The pid the fold signalled is the one known before it (pid > 0 then).
  if (replay && p.pid() <= 0) replay = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    const std::string& sig = steps[k].signal;
    const int64_t wait_ms = steps[k].wait_ms;
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "stop cancelled", false);
    const bool folded = replay && k < fold->steps.size();
    replay = folded;
    Result<GroupStatus> sent = Status::Internal("not asked");
    if (folded) {
      const StopSignalRecord& r = fold->steps[k].first;
      sent = r.exit_status != 0
                 ? Result<GroupStatus>(Status::Io("process status check failed on the target: " +
                                                  TailLines(fold_stderr, 3)))
                 : ParseGroupStatus(r.status_line);
    } else {
      sent = SignalGroup(*c.session, sig, pid, rt);
    }
    if (!sent.ok()) return RemoteFailure(sent.status(), c.target);
    if (!sent->signalled) {  // gone (or no longer ours) since the last look
      not_ours(*sent);
      return finish_ok(signals.empty());
    }
    signals.push_back("SIG" + sig);
    const std::optional<StopWaitRecord> waited = folded ? fold->steps[k].second : std::nullopt;
    Result<bool> gone = false;
    if (waited && waited->result == "gone") {
      gone = true;
    } else if (waited && waited->result == "alive") {
      gone = false;
    } else if (waited && waited->result == "failed") {
      gone = Status::Io("process status check failed on the target: " + TailLines(fold_stderr, 3));
    } else {  // pending (the fold's budget ran out in this wait), or not folded
      replay = false;
      const int64_t left = waited ? std::max<int64_t>(0, wait_ms - waited->waited_ms) : wait_ms;
      gone = WaitGone(c, pid, left, ctx, "SIG" + sig, rt);
    }
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
