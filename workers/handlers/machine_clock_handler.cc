// machine.clock: each machine's clock offset from the worker's, measured by
// timestamp exchanges over the connection the worker already has to it.
//
// The exchange (SshSession::ClockExchange, clock_exchange_protocol.h): one
// exec channel runs a loop that answers each request line with its clock,
// read by python3 or bash's $EPOCHREALTIME with no process started between
// the request and the answer (`date` per line only where neither exists).
// Per sample: the worker's wall clock t0, the machine's clock, t1. The
// machine read its clock somewhere between t0 and t1, so its offset is
// remote - (t0 + t1) / 2, to within (t1 - t0) / 2. Of `samples` exchanges the
// one with the shortest round trip is kept (the least queueing on either
// side). Only when the exchange cannot run on a machine that answers is the
// older measure used, `date +%s%N` as one command per sample through the
// command shell (method "command": processes start before the read, so it
// runs late on a loaded host), with the exchange's error kept
// (exchange_error). A machine that cannot be reached,
// or whose clock prints no number, gets an error of its own; the others are
// still measured. Idempotent: a re-delivered task measures again.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workers/handlers/handlers.h"
#include "workers/remote.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::workers {

namespace {

// Each sample costs one round trip on an open channel: take plenty.
constexpr int kDefaultSamples = 9;

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Nanoseconds since the epoch as `date +%s%N` prints them (digits, a
// newline); nullopt for anything else (a `date` without %N prints "N").
std::optional<int64_t> ParseNanos(const std::string& out) {
  std::string t = out;
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  if (t.empty() || t.size() > 20 || !std::all_of(t.begin(), t.end(), ::isdigit)) return std::nullopt;
  return std::strtoll(t.c_str(), nullptr, 10);
}

// The older measure: one `date +%s%N` command per sample.
std::vector<ssh::ClockSample> MeasureByCommands(ssh::SshSession& session, int samples, TaskContext& ctx,
                                                std::string* last_error) {
  std::vector<ssh::ClockSample> got;
  for (int i = 0; i < samples && !ctx.cancelled.load(); ++i) {
    ssh::ClockSample s;
    s.t0_us = WallMicros();
    auto run = RunRemote(session, {"date", "+%s%N"}, std::chrono::seconds(10));
    s.t1_us = WallMicros();
    if (!run.ok()) {
      *last_error = run.status().message();
      continue;
    }
    const auto nanos = run->exit_status == 0 ? ParseNanos(run->stdout_data) : std::nullopt;
    if (!nanos) {
      *last_error = fmt::format("`date +%s%N` exited {} and printed no nanoseconds ({} bytes)", run->exit_status,
                                run->stdout_data.size());
      continue;
    }
    s.remote_ns = *nanos;
    got.push_back(s);
  }
  return got;
}

// The machine answers but the exchange could not run there (no loop came up,
// it answered no clock, or it hung): worth the older measure. A machine that
// cannot be reached or logged into would refuse that just the same.
bool FallBackAfter(const Status& exchange) {
  switch (ssh::ErrorKindOf(exchange)) {
    case ssh::SshErrorKind::kRemoteError:
    case ssh::SshErrorKind::kChannelFailed:
    case ssh::SshErrorKind::kTimeout:
      return true;
    default:
      return false;
  }
}

json MeasureOne(const tasks::Machine& machine, int samples, TaskContext& ctx) {
  json out = {{"machine", MachineName(machine)}};
  auto target = TargetFromMachine(machine);
  if (!target.ok()) {
    out["error"] = target.status().message();
    return out;
  }
  // A connection of its own for the exchange (the shared one when nobody
  // holds it): the exchange holds its session for every sample, and a task
  // beside it on the same node (the profile listing after the stop, a
  // readiness poll) must not queue behind it.
  auto session = ctx.pool.Acquire(*target);
  std::string method, last_error;
  std::vector<ssh::ClockSample> got;
  auto exchanged = session->ClockExchange(samples, std::chrono::seconds(10));
  if (exchanged.ok()) {
    got = std::move(*exchanged);
  } else if (!ctx.cancelled.load() && FallBackAfter(exchanged.status())) {
    out["exchange_error"] = exchanged.status().message();
    got = MeasureByCommands(*session, samples, ctx, &last_error);
    method = "command";
  }
  out["samples"] = static_cast<int>(got.size());
  const auto best = ssh::BestClockEstimate(got);
  if (!best) {
    if (!last_error.empty()) {
      out["error"] = last_error;
    } else if (!exchanged.ok() && !ctx.cancelled.load()) {
      out["error"] = exchanged.status().message();
    } else {
      out["error"] = "cancelled";
    }
    return out;
  }
  out["method"] = method.empty() ? ssh::ClockMethodName(best->method) : method;
  out["offset_ms"] = best->offset_ms;
  out["rtt_ms"] = best->rtt_ms;
  out["uncertainty_ms"] = best->uncertainty_ms;
  return out;
}

}  // namespace

TaskOutcome MachineClock(const tasks::MachineClock& payload, const proto::Task&, TaskContext& ctx) {
  const int samples = payload.samples() > 0 ? std::min(payload.samples(), 50) : kDefaultSamples;
  // Every machine at once, each over its own connection: a deployment's
  // measure then costs one machine's exchange, not the sum of them (the end
  // measure is on the run's critical path when the analyses are short).
  // Progress goes from this thread only (it talks to the broker).
  std::vector<std::string> names;
  for (const tasks::Machine& m : payload.machines()) names.push_back(MachineName(m));
  ctx.progress("clock of " + fmt::format("{}", fmt::join(names, ", ")));
  std::vector<std::future<json>> measures;
  for (const tasks::Machine& m : payload.machines()) {
    measures.push_back(std::async(std::launch::async, [&ctx, &m, samples] { return MeasureOne(m, samples, ctx); }));
  }
  json offsets = json::array();
  for (auto& f : measures) offsets.push_back(f.get());  // in the payload's order
  if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "cancelled", false);
  TaskOutcome out;
  out.ok = true;
  out.result = {{"offsets", offsets}, {"when", payload.when()}, {"measured_at_ms", WallMicros() / 1000}};
  return out;
}

}  // namespace npuprof::workers
