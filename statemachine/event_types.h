// Names of the event types every run kind shares. Kind-specific events are
// declared next to their machine.
#pragma once

namespace npuprof::sm::ev {

inline constexpr const char* kRunSubmitted = "RunSubmitted";
inline constexpr const char* kStateChanged = "StateChanged";
inline constexpr const char* kTaskScheduled = "TaskScheduled";
inline constexpr const char* kTaskSucceeded = "TaskSucceeded";
inline constexpr const char* kTaskFailed = "TaskFailed";
inline constexpr const char* kTaskRetryScheduled = "TaskRetryScheduled";
inline constexpr const char* kTaskRedispatched = "TaskRedispatched";
inline constexpr const char* kTaskResultIgnored = "TaskResultIgnored";
inline constexpr const char* kTaskAbandoned = "TaskAbandoned";
inline constexpr const char* kTimerScheduled = "TimerScheduled";
inline constexpr const char* kTimerFired = "TimerFired";
inline constexpr const char* kTimerCancelled = "TimerCancelled";
inline constexpr const char* kCancelRequested = "CancelRequested";
inline constexpr const char* kRunRecovered = "RunRecovered";
inline constexpr const char* kRunFinished = "RunFinished";
inline constexpr const char* kSignalReceived = "SignalReceived";
inline constexpr const char* kWatchRequested = "WatchRequested";
// A run asks the broker to submit a child run ({"run_id", "index"}; the
// kind and spec come from the parent's state, statemachine/sweep_machine.h)
// or to cancel one ({"run_id"}). The broker acts on them once committed and
// again at recovery; both are idempotent (a derived child id is submitted
// at most once, a finished child ignores a cancel).
inline constexpr const char* kChildRunRequested = "ChildRunRequested";
inline constexpr const char* kChildCancelRequested = "ChildCancelRequested";

// Signals the broker itself sends.
inline constexpr const char* kSignalWatchedRunFinished = "watched_run_finished";

}  // namespace npuprof::sm::ev
