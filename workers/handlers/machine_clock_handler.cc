// machine.clock: each machine's clock offset from the worker's, measured by
// timestamp exchanges over the connection the worker already has to it.
//
// One exchange: note the worker's wall clock t0, run `date +%s%N` on the
// machine (through its command shell: one round trip), note t1. The machine
// read its clock somewhere between t0 and t1, so its offset is remote -
// (t0 + t1) / 2, to within (t1 - t0) / 2. Of `samples` exchanges the one with
// the shortest round trip is kept (the least queueing on either side). A
// machine that cannot be reached, or whose `date` prints no number, gets an
// error of its own; the others are still measured. Idempotent: a
// re-delivered task measures again.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "workers/handlers/handlers.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

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

json MeasureOne(const tasks::Machine& machine, int samples, TaskContext& ctx) {
  json out = {{"machine", MachineName(machine)}};
  auto target = TargetFromMachine(machine);
  if (!target.ok()) {
    out["error"] = target.status().message();
    return out;
  }
  auto session = ctx.pool.Get(*target);
  std::optional<double> best_rtt, best_offset;
  int readings = 0;
  std::string last_error;
  for (int i = 0; i < samples && !ctx.cancelled.load(); ++i) {
    const int64_t t0 = WallMicros();
    auto run = RunRemote(*session, {"date", "+%s%N"}, std::chrono::seconds(10));
    const int64_t t1 = WallMicros();
    if (!run.ok()) {
      last_error = run.status().message();
      continue;
    }
    const auto nanos = run->exit_status == 0 ? ParseNanos(run->stdout_data) : std::nullopt;
    if (!nanos) {
      last_error = fmt::format("`date +%s%N` exited {} and printed no nanoseconds ({} bytes)", run->exit_status,
                               run->stdout_data.size());
      continue;
    }
    ++readings;
    const double rtt_ms = static_cast<double>(t1 - t0) / 1000.0;
    const double offset_ms = static_cast<double>(*nanos) / 1e6 - static_cast<double>(t0 + t1) / 2000.0;
    if (!best_rtt || rtt_ms < *best_rtt) {
      best_rtt = rtt_ms;
      best_offset = offset_ms;
    }
  }
  out["samples"] = readings;
  if (!best_rtt) {
    out["error"] = last_error.empty() ? "cancelled" : last_error;
    return out;
  }
  out["offset_ms"] = *best_offset;
  out["rtt_ms"] = *best_rtt;
  out["uncertainty_ms"] = *best_rtt / 2.0;
  return out;
}

}  // namespace

TaskOutcome MachineClock(const tasks::MachineClock& payload, const proto::Task&, TaskContext& ctx) {
  const int samples = payload.samples() > 0 ? std::min(payload.samples(), 50) : 5;
  json offsets = json::array();
  for (const tasks::Machine& m : payload.machines()) {
    ctx.progress("clock of " + MachineName(m));
    offsets.push_back(MeasureOne(m, samples, ctx));
  }
  if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "cancelled", false);
  TaskOutcome out;
  out.ok = true;
  out.result = {{"offsets", offsets}, {"when", payload.when()}, {"measured_at_ms", WallMicros() / 1000}};
  return out;
}

}  // namespace npuprof::workers
