#include "statemachine/run_state.h"

#include <initializer_list>
#include <ostream>

namespace npuprof::sm {

std::string_view LeasePhaseName(LeasePhase phase) {
  switch (phase) {
    case LeasePhase::kNone: return "none";
    case LeasePhase::kProbing: return "probing";
    case LeasePhase::kWaiting: return "waiting";
    case LeasePhase::kHeld: return "held";
    case LeasePhase::kReleased: return "released";
    case LeasePhase::kRefused: return "refused";
  }
  return "unknown";
}

std::ostream& operator<<(std::ostream& os, LeasePhase phase) { return os << LeasePhaseName(phase); }

std::string_view TaskStatusName(TaskStatus status) {
  switch (status) {
    case TaskStatus::kPending: return "pending";
    case TaskStatus::kRetryWait: return "retry_wait";
    case TaskStatus::kSucceeded: return "succeeded";
    case TaskStatus::kFailed: return "failed";
    case TaskStatus::kAbandoned: return "abandoned";
  }
  return "unknown";
}

std::optional<TaskStatus> ParseTaskStatus(std::string_view name) {
  for (TaskStatus s : {TaskStatus::kPending, TaskStatus::kRetryWait, TaskStatus::kSucceeded, TaskStatus::kFailed,
                       TaskStatus::kAbandoned})
    if (TaskStatusName(s) == name) return s;
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, TaskStatus status) { return os << TaskStatusName(status); }

std::string_view RunStatusName(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning: return "running";
    case RunStatus::kOk: return "ok";
    case RunStatus::kFailed: return "failed";
    case RunStatus::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::optional<RunStatus> ParseRunStatus(std::string_view name) {
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kOk, RunStatus::kFailed, RunStatus::kCancelled})
    if (RunStatusName(s) == name) return s;
  return std::nullopt;
}

std::ostream& operator<<(std::ostream& os, RunStatus status) { return os << RunStatusName(status); }

}  // namespace npuprof::sm
