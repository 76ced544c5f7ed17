// Engine: the pure core shared by every run kind.
//   Decide(state, input) -> events   (no I/O)
//   Apply(state, event)  -> state    (no I/O)
// Inputs are what the outside world reports; the broker turns them into
// events through Decide and appends those atomically.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "npuprof.pb.h"
#include "statemachine/decision.h"
#include "statemachine/run_kind.h"

namespace npuprof::sm {

struct Input {
  enum class Type { kSubmit, kTaskResult, kTimerFired, kCancel, kWorkerLost, kRecover, kSignal, kLeaseGranted, kLeaseRefused,
                    kCheckDevices };
  Type type = Type::kSubmit;
  int64_t now_ms = 0;
  // kSubmit
  std::string kind;
  json spec;
  // kTaskResult / kWorkerLost
  std::string task_id;
  uint32_t attempt = 0;
  bool ok = false;
  bool retryable = false;
  std::string error;
  std::string error_kind;
  json result;           // result_json
  json blobs;            // name -> sha256 of stored evidence
  json link;             // kTaskResult: the attempt's link figures (TaskLinkJson, task_link.h); null: not sent
  std::string worker;    // who reported / who was lost
  // kTimerFired
  std::string timer_id;
  // kCancel
  std::string by;
  // kSignal (payload in result)
  std::string signal;
  // kLeaseGranted: the device ids of a one-leg lease, or every leg in `legs`;
  // kLeaseRefused: why (in error); kCheckDevices: the quarantined device ids
  // the run waits for on `machine` ("" = the run's machine)
  DeviceIds devices;
  LeaseGrant legs;
  std::string machine;
};

class KindRegistry {
 public:
  void Register(std::unique_ptr<RunKind> kind);
  const RunKind* Find(std::string_view name) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::unique_ptr<RunKind>, std::less<>> kinds_;
};

// The registry with every run kind this build knows.
const KindRegistry& DefaultKinds();

// Produces the events for one input. A new run starts from RunState{run_id}.
// Returns a non-ok Status for inputs that would break the machine (illegal
// transition, unknown kind, spec invalid); then nothing is appended.
Result<std::vector<NewEvent>> Decide(const KindRegistry& kinds, const RunState& state, const Input& input);

// Decide, plus the state those events lead to (decision.h), so a caller that
// keeps the state need not apply them a second time.
Result<Decided> DecideWithState(const KindRegistry& kinds, const RunState& state, const Input& input);
// Same, deciding on the caller's state instead of a copy of it (a run with
// many tasks is costly to copy for every input). On failure the moved-in
// state is lost: a caller that keeps states must rebuild that run's.
Result<Decided> DecideWithState(const KindRegistry& kinds, RunState&& state, const Input& input);

// The cause an input's events record ("submit", "task:<id>#<attempt>",
// "timer:<id>", "cancel:<by>", ...).
std::string InputCause(const Input& input);

// Folds one stored event into state (common events, then the kind's own).
// True when the event went to the kind's own fold (ApplyKindEvent), which is
// what may change RunState.data.
bool Apply(const KindRegistry& kinds, RunState& state, const std::string& type, const json& payload,
           uint64_t seq, int64_t time_ms);
// Same, with the kind already resolved (nullptr = common events only).
bool ApplyWith(const RunKind* kind, RunState& state, const std::string& type, const json& payload,
               uint64_t seq, int64_t time_ms);
// Folds one stored event. A payload that is not a JSON object, or that the
// fold cannot read (a key of the wrong type, a RunFinished status other than
// "ok", "failed" or "cancelled"), is Corruption naming the run,
// the event's seq and its type; the state may then be partly updated and is
// to be dropped. The schema check of proto/events.proto is `verify`'s
// (statemachine/event_schema.h); the fold stays cheap. When to_kind is given
// it is set to Apply's answer: whether the kind's own fold read the event.
Status ApplyStored(const KindRegistry& kinds, RunState& state, const proto::Event& ev, bool* to_kind = nullptr);
// An event decided but not stored yet (no seq, hash or position): applied as
// the decision applied it, with the seq after the state's last; the state's
// hash stays the last stored one.
void ApplyStaged(const KindRegistry& kinds, RunState& state, const proto::Event& ev);

// Rebuilds a run from its events; the first event it cannot read is the error.
Result<RunState> Fold(const KindRegistry& kinds, const std::vector<proto::Event>& events);

// Backoff before attempt `next_attempt` (>= 2) under policy.
int64_t RetryDelayMs(const TaskPolicy& policy, uint32_t next_attempt);

json TaskPolicyToJson(const TaskPolicy& p);
TaskPolicy TaskPolicyFromJson(const json& j);

}  // namespace npuprof::sm
