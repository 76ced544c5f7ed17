// One clock for a multi-node run: each node's clock offset from the worker
// that measured it, at the run's start and at its end (machine.clock, one
// task measuring every node over the connections the worker has; the
// worker's handler says how). Pure (no I/O).
//
//   the run starts (its devices leased)      -> machine.clock {when: start}
//   the run stops its service (its last use)  -> machine.clock {when: end}
//     (torch-profile: once its profile window closed, with the stops)
//   each answer                               -> ClockMeasured {when, measured_at_ms, offsets: [{machine,
//                                                offset_ms, uncertainty_ms, rtt_ms, samples | error}]}
//
// data.clock.{start,end} keeps them; manifests and `show` carry them so that
// traces written by different nodes can be put on one timeline (a timestamp
// of machine M minus M's offset_ms is the worker's time). A failed measure is
// no failure of the run: the offsets are simply missing.
#pragma once

#include <optional>
#include <string>

#include "statemachine/decision.h"
#include "statemachine/run_state.h"
#include "statemachine/task_result.h"

namespace npuprof::sm {

inline constexpr const char* kMachineClockTask = "machine.clock";
inline constexpr const char* kClockMeasured = "ClockMeasured";

// Schedules the measure of every node of a multi-node run (nothing for one node).
void ScheduleClock(Decision& d, const std::string& when);

// Handles a machine.clock answer of the run: records ClockMeasured on
// success. Returns false for any other task (the kind goes on with it).
bool OnClockTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result);
bool IsClockTask(const TaskInfo& task);
// Whether a machine.clock task of the run has not answered yet (a run does
// not end before it: every task it scheduled ends first).
bool ClockPending(const RunState& s);
// Abandons a machine.clock task still out (a run that ends in a cleanup or a
// cancellation does not wait for its measure; the offsets are then missing).
void AbandonPendingClock(Decision& d, const std::string& reason);

// Folds ClockMeasured into data.clock[when]; false for any other event.
bool ApplyClockEvent(RunState& s, const std::string& type, const json& payload);

// {start, end} as recorded (null when not measured), for manifests and show.
json ClockProjection(const RunState& s);

// The offset (ms) of `machine` as measured at the start, else at the end; 0
// when neither measure has it.
double ClockOffsetMs(const RunState& s, const std::string& machine);

// `machine`'s offset with its uncertainty (ms) and the measure it came from
// ("start", else "end"); nullopt when neither measure has it (a failed
// measure, an entry with an error, or a one-node run).
struct MeasuredClock {
  double offset_ms = 0;
  double uncertainty_ms = 0;
  std::string when;
};
std::optional<MeasuredClock> MeasuredClockOf(const RunState& s, const std::string& machine);

}  // namespace npuprof::sm
