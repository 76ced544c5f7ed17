// What a long run's state forgets: the ended tasks and fired timers of the
// kinds and purposes its RunKind repeats without bound
// (RunKind::ForgetsEndedTasks / ForgetsFiredTimers; serve --watch-hbm takes
// a sample every few seconds for days, five events each).
//
// Contract:
//  * Called by the fold (engine Apply) just before a TaskScheduled of
//    `task_kind` / a TimerScheduled of `purpose` is folded, and only then:
//    the state forgets the tasks of that kind that have ended (succeeded,
//    failed for good, abandoned), with the fired or cancelled retry timers
//    that named them, and the timers of that purpose that are no longer
//    armed. A task still pending or waiting for its retry, and an armed
//    timer, are never forgotten, so recovery, cancel, AbandonOutstanding and
//    the verifier's "no task open at the end" see exactly what they saw.
//  * The events stay in the log: `npuprof events` and the audit read them
//    there. Replay folds the same events through the same code, so a
//    replayed state forgets the same entries (verify compares the same).
//  * What changes: a late duplicate answer of a forgotten task is ignored as
//    "unknown task" instead of "duplicate result" (both TaskResultIgnored).
//  * Cost: one pass over the run's tasks (or timers) per scheduling of a
//    forgetting kind; with forgetting, those maps hold a bounded number of
//    entries, so a sample costs the same after 10 or 10,000 samples.
// Pure: no I/O.
#pragma once

#include <string_view>

#include "statemachine/run_state.h"

namespace npuprof::sm {

class RunKind;

void ForgetEndedTasks(const RunKind* kind, RunState& s, std::string_view task_kind);
void ForgetFiredTimers(const RunKind* kind, RunState& s, std::string_view purpose);

}  // namespace npuprof::sm
