// RunState: everything known about one run, folded from its events.
// Pure data; built only by Apply() over the run's event stream.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::sm {

using json = nlohmann::json;

// Retry policy of one task: attempts are 1-based; a retryable failure of
// attempt a < max_attempts schedules attempt a+1 after backoff_ms * 2^(a-1),
// capped at max_backoff_ms. Each task kind's policy: statemachine/task_policies.h.
struct TaskPolicy {
  int max_attempts = 3;
  int64_t backoff_ms = 1000;
  int64_t max_backoff_ms = 30000;
  int64_t lease_ms = 120000;  // no progress within this -> the holder is considered lost
};

struct TaskInfo {
  std::string task_id;
  std::string kind;
  uint32_t attempt = 1;
  int failures = 0;  // retryable failures and lost holders so far (recovery does not count)
  json payload = json::object();
  TaskPolicy policy;
  // "pending" (scheduled, not finished), "retry_wait", "succeeded", "failed", "abandoned"
  std::string status = "pending";
  json result;  // TaskSucceeded payload or final TaskFailed payload
  bool in_flight() const { return status == "pending"; }
};

struct TimerInfo {
  std::string timer_id;
  std::string purpose;  // "retry" (payload.task_id) or kind-specific
  int64_t deadline_ms = 0;
  json payload = json::object();
  bool armed = true;
};

// The run's hold on NPUs of its machine (see statemachine/device_lease.h).
//   phase "": needs none; "probing": finding free devices (devices: null);
//   "waiting": DevicesRequested, queued until the broker grants; "held";
//   "released".
// Where a run's device lease stands (statemachine/device_lease.h has the
// order): kNone before any request (or for a kind that needs no NPUs),
// kProbing while the lease probe looks for free ones, kWaiting once
// DevicesRequested is recorded, kHeld after DevicesLeased, kReleased after
// DevicesReleased, kRefused after DevicesUnavailable.
enum class LeasePhase { kNone, kProbing, kWaiting, kHeld, kReleased, kRefused };

// The phase's name in projections and messages ("none", "probing", ...).
std::string_view LeasePhaseName(LeasePhase phase);
std::ostream& operator<<(std::ostream& os, LeasePhase phase);

struct LeaseInfo {
  LeasePhase phase = LeasePhase::kNone;
  std::string machine;
  json devices = nullptr;     // requested ids (array), or null = any `count` free ones
  int count = 0;
  json free = nullptr;        // probe view when devices were not given
  json busy = nullptr;
  json granted = nullptr;     // ids held (array) once granted
  uint64_t request_pos = 0;   // global position of DevicesRequested (FIFO order); 0 = not stored yet
  int64_t requested_ms = 0;
};

struct RunState {
  std::string run_id;
  std::string kind;
  std::string state = "new";
  std::string status = "running";  // running | ok | failed | cancelled
  std::string machine;
  std::string tag;
  std::string error;
  json spec = json::object();
  json data = json::object();  // kind-specific fold (probe results, manifests...)
  std::map<std::string, TaskInfo> tasks;
  std::map<std::string, TimerInfo> timers;
  uint64_t last_seq = 0;
  std::string last_hash;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t finished_ms = 0;
  bool terminal = false;
  bool cancel_requested = false;
  int recoveries = 0;
  LeaseInfo lease;
  std::vector<std::string> watching;  // runs whose end this run waits for (WatchRequested)
  int next_task_no = 1;
  int next_timer_no = 1;

  const TaskInfo* FindTask(const std::string& id) const {
    auto it = tasks.find(id);
    return it == tasks.end() ? nullptr : &it->second;
  }
};

}  // namespace npuprof::sm
