// The memory-profile run kind's steps, in the order each mode runs them, and
// the kind's transition table computed from them. Pure.
//
// Contract:
// * The run's state is the step in progress. A step's name is also where its
//   outcome is recorded (data.<step>, or data.step_failures.<step> when it
//   failed), so the planner's "done" and the state share one word. The one
//   state that is not a step, "awaiting_service_stop" (attach: the live steps
//   are done, the serve run has not ended), is listed as a wait.
// * The planner (memory_profile_machine.cc) walks its mode's list in order and
//   runs the first step not done, passing over a step whose skip reason holds.
//   On the failure or cancel path of a run that launched a service it runs
//   only the cleanup steps (logs on failure, stop on failure or cancel), then
//   finishes.
// * MemoryProfileTable() allows exactly the moves this walk can make, over
//   all modes (one table per kind):
//     queued or a step -> the next step; or a later one when every step
//       between may be passed over for reasons that can hold together while
//       the later step's own reason does not (a reason that did not hold for
//       the step moved from and cannot turn true later is not one of them);
//       -> completed likewise past the end; a step marked early may be
//       passed over once it is done (its task ran beside the step before);
//     a step while a launched service may be up -> each later cleanup step;
//     queued or any step -> failed, cancelled (failure, cancel, lease errors).
// * States named differently before the steps named them are mapped from
//   their old names (kMemoryRenamedStates, see TransitionTable::Current).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "statemachine/transition_table.h"

namespace npuprof::sm {

// Why the planner passes a step over (it then goes on to the next one).
enum class MemSkip : uint8_t {
  kNever,
  kNotLive,     // attach: the serve run has ended, or it did not answer the readiness check
  kServeEnded,  // attach: the serve run has ended (nothing left to wait for)
  kNotWrapped,  // attach: the service ran without the msprof wrap script (there is no msprof data)
  kNoOperatorMemory,  // standalone: the spec did not ask for operator memory (operator_memory false)
};

// Whether the failure / cancel path of a run that launched a service runs the step.
enum class MemCleanup : uint8_t { kNo, kOnFailure, kOnFailureOrCancel };

struct MemStep {
  std::string_view name;  // the run's state while it runs; data.<name> holds its outcome
  MemSkip skip = MemSkip::kNever;
  bool wait = false;        // no task: the run waits in this state for the watched run's end
  bool service_up = false;  // a service this run launched may be running while the run is here
  MemCleanup cleanup = MemCleanup::kNo;
  bool critical = false;    // its failure fails the run (after the cleanup steps)
  // Its task may run beside the step before it, so the walk may find it
  // done (a deployment's per-node step waits for its turn: memory_profile_machine.cc).
  bool early = false;
};

// The steps of a mode: "standalone", "install_wrapper", anything else = attach.
std::span<const MemStep> MemoryStepsOf(std::string_view mode);

// The kind's transition table (see the contract above), computed once.
const TransitionTable& MemoryProfileTable();

}  // namespace npuprof::sm
