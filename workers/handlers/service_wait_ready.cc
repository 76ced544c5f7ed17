// service.wait_ready: ready = GET /health answers 200 and GET /v1/models lists
// the served name. The wait runs on the target (ready_probe.h): slices of a
// few seconds, each one remote command that polls the leader (dead, or not
// the service's: its marker, service_scripts.h), the start-up log line and
// the port's listener, and asks HTTP from the target once one of them hints
// it may answer; a ready service is seen in the round trip that started the
// slice. Where the target cannot probe (no python3), the rounds of before
// remain: a short remote wait for the log line or the leader's death, then
// /health and /v1/models over SSH direct-tcpip channels.
// The result says what made the round that saw it ready look (seen_by:
// "log", or "probe" for a round without the line). Read-only;
// a re-dispatched attempt only waits for what is left of the absolute
// deadline.
#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/json_depth.h"
#include "common/time_util.h"
#include "workers/handlers/ready_probe.h"
#include "workers/handlers/ready_then_snapshot.h"
#include "workers/handlers/ready_watch.h"
#include "workers/handlers/service_common.h"
#include "workers/poll_backoff.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers::service {

namespace {

struct Probe {
  bool ready = false;
  std::string observation;  // what the last round saw
  json models = json::array();
};

Probe ProbeHttp(ssh::SshSession& session, int port, const std::string& served) {
  Probe pr;
  ssh::HttpRequest req;
  req.remote_port = port;
  req.path = "/health";
  req.timeout = std::chrono::milliseconds(3000);
  auto health = session.Http(req);
  if (!health.ok()) {
    pr.observation = "/health: " + health.status().message();
    return pr;
  }
  if (health->status != 200) {
    pr.observation = fmt::format("/health answered {}", health->status);
    return pr;
  }
  req.path = "/v1/models";
  auto models = session.Http(req);
  if (!models.ok()) {
    pr.observation = "/v1/models: " + models.status().message();
    return pr;
  }
  const Result<json> parsed = ParseJson(models->body, kMaxTargetJsonDepth);
  const json body = parsed.ok() ? *parsed : json(nullptr);
  if (models->status == 200 && body.is_object() && body.contains("data") && body["data"].is_array())
    for (const auto& m : body["data"])
      if (m.is_object() && m.contains("id") && m["id"].is_string()) pr.models.push_back(m["id"]);
  for (const auto& id : pr.models)
    if (id == served) pr.ready = true;
  pr.observation = pr.ready ? "ready"
                            : fmt::format("/v1/models answered {} without '{}' (lists {})", models->status, served,
                                          pr.models.dump());
  return pr;
}

TaskOutcome Died(ssh::SshSession& session, const std::string& rt, int64_t pid, bool pid_reused) {
  TaskOutcome out;
  json d = Diagnostics(session, rt, out);
  if (pid_reused) d["pid_not_ours"] = true;
  const std::string hint = d.value("env_hint", "");
  const std::string tail = TailLines(d.value("stderr_tail", ""), 5);
  out.retryable = false;
  out.result = d;
  if (!hint.empty()) {
    out.error_kind = "environment";
    out.error = fmt::format("vLLM (pid {}) exited during start-up because of an environment problem: {}. "
                            "stderr tail:\n{}",
                            pid, hint, tail);
  } else {
    out.error_kind = "service_died";
    out.error = fmt::format("vLLM (pid {}) exited before it was ready{}; stderr tail ({}/stderr.log):\n{}", pid,
                            pid_reused ? " (the pid now belongs to another process without the service's marker)" : "",
                            rt, tail);
  }
  return out;
}

TaskOutcome NeverReady(ssh::SshSession& session, const std::string& rt, int64_t pid, int64_t timeout_ms,
                       const std::string& last) {
  TaskOutcome out;
  json d = Diagnostics(session, rt, out);
  d["last_health"] = last;
  out.result = d;
  out.error_kind = "never_ready";
  out.error = fmt::format("vLLM (pid {}) was not ready within {} s (last check: {}); stdout tail:\n{}", pid,
                          timeout_ms / 1000, last, TailLines(d.value("stdout_tail", ""), 5));
  return out;
}

// The longest slice of the wait on the target: one round trip per slice
// while the service starts; the cancellation and the progress line are
// looked at between slices.
constexpr std::chrono::milliseconds kTargetSlice{3000};

struct WaitState {
  int64_t pid = 0;
  int port = 0;
  std::string served;
  std::string rt;
  int64_t start = 0;
  int64_t deadline = 0;
  int64_t timeout_ms = 0;
  int rounds = 0;
  std::string last = "not polled yet";
};

// The wait on the target (ready_probe.h); nullopt when the target cannot
// probe (then the caller's SSH-probe rounds go on from here).
std::optional<TaskOutcome> WaitOnTarget(ssh::SshSession& session, const std::string& marker, WaitState& w,
                                        TaskContext& ctx, const ssh::SshTarget& target) {
  const RemoteCheck check = ReadyProbeCheck(w.pid, marker, w.rt, w.port, w.served);
  bool watch = true;  // one python3 watches the slice (ready_watch.h), until the target cannot run it
  while (true) {
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "readiness wait cancelled", false);
    const auto slice = std::min(kTargetSlice, std::chrono::milliseconds(std::max<int64_t>(0, w.deadline - NowMs())));
    Result<RemoteWaitResult> r = Status::Internal("not watched");
    if (watch) {
      auto run = RunRemote(session, ReadyWatchArgv(w.pid, marker, w.rt, w.port, w.served, slice),
                           slice + std::chrono::seconds(30));
      if (!run.ok()) return RemoteFailure(run.status(), target);
      r = run->exit_status == 0 && run->stdout_omitted == 0
              ? ParseRemoteWait(run->stdout_data)
              : Result<RemoteWaitResult>(Status::Corruption(ExitText(*run)));
      if (!r.ok()) {
        // Not the watcher's output (no python3 there, or too old): the
        // shell loop's polls and probes from now on.
        spdlog::debug("the readiness watcher on {}: {} ({}); polling with the shell check", target.Endpoint(),
                      r.status().message(), TailLines(run->stderr_data, 2));
        watch = false;
        continue;
      }
    } else {
      r = RunRemoteWait(session, check, slice);
    }
    if (!r.ok()) return RemoteFailure(r.status(), target);
    auto o = ParseReadyObservation(r->observation);
    if (!o.ok()) return RemoteFailure(o.status(), target);
    w.rounds += o->probes;  // a round is an HTTP probe, as on the SSH path
    if (o->leader == ReadyObservation::Leader::kGone) return Died(session, w.rt, w.pid, false);
    if (o->leader == ReadyObservation::Leader::kForeign) return Died(session, w.rt, w.pid, true);
    if (o->probe == ReadyObservation::Probe::kUnavailable) return std::nullopt;
    w.last = DescribeObservation(*o, w.served);
    if (ProbeSaysReady(*o, w.served))
      return TaskOutcome::Success(json{{"ready_after_ms", NowMs() - w.start},
                                       {"rounds", w.rounds},
                                       // "log": the first probe, made because the line was there
                                       {"seen_by", o->hint == "log" && w.rounds == 1 ? "log" : "probe"},
                                       {"models", o->ids},
                                       {"port", w.port},
                                       {"pid", w.pid}});
    const int64_t now = NowMs();
    if (now >= w.deadline) return NeverReady(session, w.rt, w.pid, w.timeout_ms, w.last);
    ctx.progress(
        fmt::format("waiting for readiness on port {} ({} s left): {}", w.port, (w.deadline - now) / 1000, w.last));
  }
}

}  // namespace

namespace {

TaskOutcome WaitReadyOnly(const tasks::ServiceWaitReady& p, TaskContext& ctx) {
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  // A wait of seconds to minutes: a session of its own (ssh_pool.h), so it
  // neither waits behind nor blocks the worker's short calls to the target.
  c.session.reset();
  c.session = ctx.pool.Acquire(c.target);
  auto resolved = ResolveRemotePath(*c.session, p.runtime_dir());
  if (!resolved.ok()) return RemoteFailure(resolved.status(), c.target);
  WaitState w;
  w.rt = *resolved;
  w.pid = p.pid();
  w.port = p.port();
  w.served = p.served_model_name();
  const std::string& rt = w.rt;
  const int64_t pid = w.pid;
  const int port = w.port;
  const std::string& served = w.served;
  if (pid <= 0 || port <= 0) return TaskOutcome::Failure("bad_payload", "wait_ready needs pid and port", false);
  w.timeout_ms = std::clamp<int64_t>(p.health_timeout_s(), 0, 86400) * 1000;
  w.start = NowMs();
  w.deadline = std::min(w.start + w.timeout_ms, p.deadline_ms());
  const int64_t start = w.start;
  const int64_t deadline = w.deadline;
  auto marker = ServiceMarker(rt);
  if (!marker.ok()) return TaskOutcome::Failure("bad_payload", marker.status().message(), false);
  if (auto done = WaitOnTarget(*c.session, *marker, w, ctx, c.target)) return *std::move(done);

  // The target cannot probe: rounds with HTTP over SSH.
  std::string last = w.last;
  int rounds = w.rounds;
  // Each round waits on the target (workers/remote_wait.h) for the leader's
  // death or the start-up log line, for at most one back-off step, then asks
  // HTTP. The log line makes the probe come within ~50 ms of readiness; a
  // service that never prints it (another log level) is still probed every
  // 250 ms. When the log says ready but HTTP does not agree, the rounds go
  // on with the group check and a back-off sleep instead (the log cannot
  // un-say it).
  bool log_hint = true;
  const RemoteCheck ready_check = ReadySignalCheck(pid, *marker, rt);
  PollBackoff backoff(std::chrono::milliseconds(250));
  while (true) {
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "readiness wait cancelled", false);
    const auto step = std::min(backoff.Next(), std::chrono::milliseconds(std::max<int64_t>(0, deadline - NowMs())));
    bool hinted = false;  // this round's probe comes because the log said ready
    if (log_hint) {
      auto rw = RunRemoteWait(*c.session, ready_check, step);
      if (!rw.ok()) return RemoteFailure(rw.status(), c.target);
      if (rw->observation.rfind("leader=gone", 0) == 0) return Died(*c.session, rt, pid, false);
      if (rw->observation.rfind("leader=foreign", 0) == 0) return Died(*c.session, rt, pid, true);
      hinted = rw->signalled;
    } else {
      auto st = QueryGroup(*c.session, pid, rt);
      if (!st.ok()) return RemoteFailure(st.status(), c.target);
      if (!st->leader_alive) return Died(*c.session, rt, pid, st->leader_foreign);
    }
    Probe pr = ProbeHttp(*c.session, port, served);
    ++rounds;
    last = pr.observation;
    if (pr.ready)
      return TaskOutcome::Success(json{{"ready_after_ms", NowMs() - start},
                                       {"rounds", rounds},
                                       {"seen_by", hinted ? "log" : "probe"},
                                       {"models", pr.models},
                                       {"port", port},
                                       {"pid", pid}});
    if (hinted) log_hint = false;
    const int64_t now = NowMs();
    if (now >= deadline) return NeverReady(*c.session, rt, pid, w.timeout_ms, last);
    ctx.progress(fmt::format("waiting for readiness on port {} ({} s left): {}", port, (deadline - now) / 1000, last));
    if (!log_hint && !SleepUnlessCancelled(ctx, std::min(step, std::chrono::milliseconds(deadline - now))))
      return TaskOutcome::Failure("cancelled", "readiness wait cancelled", false);
  }
}

}  // namespace

TaskOutcome WaitReady(const tasks::ServiceWaitReady& p, const proto::Task& task, TaskContext& ctx) {
  // Ready: the parts the payload asks for next (ready_then_snapshot.h).
  return TakeAfterReady(p, task, ctx, WaitReadyOnly(p, ctx));
}

}  // namespace npuprof::workers::service
