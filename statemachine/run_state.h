// RunState: everything known about one run, folded from its events.
// Pure data; built only by Apply() over the run's event stream.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/device_ids.h"

namespace google::protobuf {
class Message;
}

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

// Where one task stands. kPending from TaskScheduled (and again from
// TaskRedispatched) until the attempt ends: the only in-flight status.
// kRetryWait after a retryable TaskFailed, until the retry is redispatched.
// The task ends kSucceeded (TaskSucceeded), kFailed (a final TaskFailed) or
// kAbandoned (TaskAbandoned).
enum class TaskStatus { kPending, kRetryWait, kSucceeded, kFailed, kAbandoned };

// The status's name in projections and messages: "pending", "retry_wait",
// "succeeded", "failed", "abandoned".
std::string_view TaskStatusName(TaskStatus status);
// The status with that name; nullopt for any other string.
std::optional<TaskStatus> ParseTaskStatus(std::string_view name);
std::ostream& operator<<(std::ostream& os, TaskStatus status);
// JSON holds a task status as its name; these make `json j = status` and
// `j.get<TaskStatus>()` (which would use the enum's number) fail to compile.
void to_json(json& j, TaskStatus status) = delete;
void from_json(const json& j, TaskStatus& status) = delete;

struct TaskInfo {
  std::string task_id;
  std::string kind;
  uint32_t attempt = 1;
  int failures = 0;  // retryable failures and lost holders so far (recovery does not count)
  json payload = json::object();
  TaskPolicy policy;
  TaskStatus status = TaskStatus::kPending;
  json result;  // TaskSucceeded payload or final TaskFailed payload
  bool in_flight() const { return status == TaskStatus::kPending; }
};

struct TimerInfo {
  std::string timer_id;
  std::string purpose;  // "retry" (payload.task_id) or kind-specific
  int64_t deadline_ms = 0;
  json payload = json::object();
  bool armed = true;
};

// Where a run's device lease stands (statemachine/device_lease.h has the
// order): kNone before any request (or for a kind that needs no NPUs),
// kProbing while the lease probe looks for free ones, kWaiting once
// DevicesRequested is recorded, kHeld after DevicesLeased, kReleased after
// DevicesReleased, kRefused after DevicesUnavailable.
enum class LeasePhase { kNone, kProbing, kWaiting, kHeld, kReleased, kRefused };

// The phase's name in projections and messages ("none", "probing", ...).
std::string_view LeasePhaseName(LeasePhase phase);
std::ostream& operator<<(std::ostream& os, LeasePhase phase);
// Not JSON by itself (it would be written as its number): write its name.
void to_json(json& j, LeasePhase phase) = delete;
void from_json(const json& j, LeasePhase& phase) = delete;

// Device ids are read once, by the fold, with the one parser of device_ids.h.
// One machine's part of a lease: a one-node run has one leg (its machine),
// a multi-node run one per node, the head first.
struct LeaseLeg {
  std::string machine;
  std::optional<DeviceIds> devices;  // requested ids, or nullopt = any `count` free ones
  int count = 0;
  DeviceIds free;             // probe view when devices were not given
  DeviceIds busy;
  DeviceIds granted;          // ids held once granted (kHeld, then kReleased)
};

// The broker's grant of one leg: `devices` on `machine` ("" = the run's only leg).
struct LeaseGrantLeg {
  std::string machine;
  DeviceIds devices;
};
using LeaseGrant = std::vector<LeaseGrantLeg>;

// The run's hold on NPUs (statemachine/device_lease.h): every leg at once or
// none (a gang).
struct LeaseInfo {
  LeasePhase phase = LeasePhase::kNone;
  std::vector<LeaseLeg> legs;
  uint64_t request_pos = 0;   // global position of DevicesRequested (FIFO order); 0 = not stored yet
  int64_t requested_ms = 0;

  // The leg on `machine` (nullptr when none).
  const LeaseLeg* Leg(const std::string& machine) const {
    for (const auto& l : legs)
      if (l.machine == machine) return &l;
    return nullptr;
  }
  // NPUs over every leg.
  int count() const {
    int n = 0;
    for (const auto& l : legs) n += l.count;
    return n;
  }
};

// How a run ended: kRunning until RunFinished, which records kOk, kFailed or
// kCancelled (and sets terminal) once.
enum class RunStatus { kRunning, kOk, kFailed, kCancelled };

// The status's name in projections, manifests, index rows and the
// RunFinished event: "running", "ok", "failed", "cancelled".
std::string_view RunStatusName(RunStatus status);
// The status with that name; nullopt for any other string.
std::optional<RunStatus> ParseRunStatus(std::string_view name);
std::ostream& operator<<(std::ostream& os, RunStatus status);
// JSON holds a run status as its name; these make `json j = status` and
// `j.get<RunStatus>()` (which would use the enum's number) fail to compile.
void to_json(json& j, RunStatus status) = delete;
void from_json(const json& j, RunStatus& status) = delete;

struct RunState {
  std::string run_id;
  std::string kind;
  std::string state = "new";
  RunStatus status = RunStatus::kRunning;
  std::string machine;
  std::string tag;
  std::string error;
  json spec = json::object();
  // The spec as its kind's message (proto/run_specs.proto; null for a kind
  // without one), decoded once when RunSubmitted is folded and again when
  // the fold changes `spec` (a lease's devices); the kinds read it through
  // SpecOf (statemachine/typed_spec.h). Shared: copying a state copies no spec.
  std::shared_ptr<const google::protobuf::Message> typed_spec;
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
  // Runs this run asked the broker to start (ChildRunRequested), in order:
  // folded for every kind, so whether a run has children never depends on
  // its kind's name (statemachine/child_runs.h).
  std::vector<std::string> requested_children;
  int next_task_no = 1;
  int next_timer_no = 1;

  const TaskInfo* FindTask(const std::string& id) const {
    auto it = tasks.find(id);
    return it == tasks.end() ? nullptr : &it->second;
  }
};

}  // namespace npuprof::sm
