// HBM drift on a long-running service: `serve --watch-hbm SECONDS`
// (spec.watch_hbm_s, 0 = off, else 0.1..86400 seconds, a decimal number,
// kept to whole milliseconds; one-node services). While the run is ready,
// one service.hbm_sample task at a time reads the service's devices
// (`npu-smi info` in one remote command) and answers one sample; the machine
// records it as HbmSampled and arms the timer kHbmSampleTimer for the next,
// SECONDS after the answer (no task waits in between, so a sample costs
// three task events, the HbmSampled and two timer events). A failed sample is
// recorded by its TaskFailed and the next is taken at the next interval. The
// sampling ends with `ready`: a stop abandons the sample that is out, a timer
// that fires after it schedules nothing, and a late answer is not recorded.
//
// A re-delivered answer is idempotent: a sample is folded only when its
// sample_no is the next one (data.hbm_watch.samples + 1).
//
// The fold (ApplyHbmSampled) keeps per device the exact running sums of the
// estimator (hbm_drift.h) and the sample at which it first said `growing`,
// plus the last kHbmRecentKept samples; Summary's `hbm_watch` gives the
// slope, its confidence bounds and the verdict per device
// (docs/FORMATS.md "hbm_watch"). Pure: no I/O.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "statemachine/decision.h"
#include "statemachine/run_state.h"
#include "statemachine/task_result.h"

namespace npuprof::sm {

inline constexpr const char* kServiceHbmSampleTask = "service.hbm_sample";
inline constexpr const char* kHbmSampled = "HbmSampled";
inline constexpr const char* kHbmSampleTimer = "hbm_sample";
inline constexpr int64_t kHbmRecentKept = 120;
// --watch-workload (spec watch_workload): before each sample, the workload
// wave of torch-profile (this task kind, its handler): kHbmWaveRequests chat
// requests, kHbmWaveConcurrency at a time, to the service's port; the
// sample then carries the requests answered so far, and `show` gives the
// slope against them too (MB per request).
inline constexpr const char* kHbmWaveTask = "torch_profile.requests";
inline constexpr int64_t kHbmWaveRequests = 8;
inline constexpr int64_t kHbmWaveConcurrency = 4;

inline constexpr double kHbmWatchMinIntervalS = 0.1;
inline constexpr double kHbmWatchMaxIntervalS = 86400;

// spec.watch_hbm_s: absent or null = 0 (off); else a number, 0 or within
// kHbmWatchMinIntervalS..kHbmWatchMaxIntervalS (an error naming the field
// and the range otherwise).
Status CheckHbmWatchInterval(json& spec);

// Takes the first sample when the run is ready and the spec asks for it.
void StartHbmWatch(Decision& d);
// The sample task (or the wave before it) answered (true: it was one of them
// and is handled).
bool OnHbmSampleSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result);
bool OnHbmSampleFailed(Decision& d, const TaskInfo& task);
// The wave answered (ok_count requests answered; 0 when it failed): the sample follows.
bool OnHbmWaveAnswered(Decision& d, const TaskInfo& task, int64_t ok_count);
// kHbmSampleTimer fired (true: it was that timer).
bool OnHbmSampleTimer(Decision& d, const TimerInfo& timer);

// The watch's tasks (the sample, the wave): ended ones are forgotten by the
// fold when the next is scheduled (statemachine/forget_ended.h), with the
// fired kHbmSampleTimer timers, so a sample costs the same on the tenth day.
bool HbmWatchForgetsTask(std::string_view task_kind);

// Folds an HbmSampled payload into s.data["hbm_watch"].
void ApplyHbmSampled(RunState& s, const json& payload);

// Summary's "hbm_watch" (null when the run takes no samples); interval_s is
// written as an integer when it is a whole number of seconds.
json HbmWatchSummary(const RunState& s, double interval_s);

}  // namespace npuprof::sm
