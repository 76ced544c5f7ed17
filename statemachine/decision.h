// Decision: the events one input produces, built step by step. Every emitted
// event is applied at once to a working copy of the state, so later steps of
// the same decision see its effect. Pure: no clock, no randomness, no I/O —
// time arrives in now_ms, ids are derived from the run id and counters.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/message.h>

#include "common/status.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

class RunKind;

struct NewEvent {
  std::string type;
  json payload = json::object();
  std::string cause;
};

// What a decision produced: its events and the state they lead to (what
// applying them to the input state gives).
struct Decided {
  std::vector<NewEvent> events;
  RunState state;
};

class Decision {
 public:
  Decision(const RunKind& kind, RunState state, int64_t now_ms, std::string cause);

  // Appends an event and applies it to state(). An illegal StateChanged marks
  // the decision failed (see status()) and is not applied.
  void Emit(const std::string& type, json payload);

  // Helpers for the common events.
  void Transition(const std::string& to, const std::string& reason = "");
  // The payload is judged against the task kind's message (task_schema.h).
  // A task whose payload does not match is still recorded (TaskScheduled,
  // so the log shows what was asked) and kept in refused_tasks(): the
  // engine fails it at once, in the same decision, as a worker would have
  // answered `bad_payload` — final, never dispatched, nothing reaches the
  // machine — and the kind's own failure path (its cleanup) runs.
  //
  // Built-in kinds schedule with Schedule() below; this form is for task
  // kinds proto/task_payloads.proto does not declare (a test's, a plugin's).
  std::string ScheduleTask(const std::string& task_kind, json payload, const TaskPolicy& policy = {});
  // Schedules the task whose payload is `payload`, one of the messages of
  // proto/task_payloads.proto: the task kind is the message's (task_kind),
  // the payload is the message in its JSON form (message_json.h), and the
  // retry policy is the run kind's for that task kind (task_policies.h)
  // unless one is given. A payload whose `machine` is left unset goes to the
  // run's machine: the decision writes the run's machine record there
  // (spec.machine_record, as the inventory recorded it), and the record is
  // judged with the rest, as ScheduleTask says. A message without a
  // (task_kind) marks the decision failed (a bug) and schedules nothing.
  std::string Schedule(const google::protobuf::Message& payload);
  std::string Schedule(const google::protobuf::Message& payload, const TaskPolicy& policy);
  std::string ScheduleTimer(const std::string& purpose, int64_t delay_ms, json payload = json::object());
  void CancelTimer(const std::string& timer_id);
  // Asks the broker to send this run the signal "watched_run_finished" when
  // run_id ends (at once if it already has).
  void WatchRun(const std::string& run_id);
  // Moves to the terminal state for status ("completed" for kOk, "failed",
  // "cancelled") and emits RunFinished carrying the status's name.
  // kRunning is no way to end: it marks the decision failed and emits nothing.
  void Finish(RunStatus status, const std::string& error = "");
  // Marks every in-flight task abandoned and cancels every armed timer.
  void AbandonOutstanding(const std::string& reason);

  const RunState& state() const { return state_; }
  // The events and the state after them; the decision is spent.
  Decided Take() &&;
  int64_t now_ms() const { return now_ms_; }
  const std::vector<NewEvent>& events() const { return events_; }
  const Status& status() const { return status_; }
  bool failed() const { return !status_.ok(); }
  // Tasks of this decision whose payload was refused: (task id, why). The
  // engine takes them (and fails each).
  std::vector<std::pair<std::string, std::string>> TakeRefusedTasks() { return std::exchange(refused_tasks_, {}); }

 private:
  const RunKind& kind_;
  RunState state_;
  int64_t now_ms_;
  std::string cause_;
  std::vector<NewEvent> events_;
  Status status_;
  std::vector<std::pair<std::string, std::string>> refused_tasks_;
};

}  // namespace npuprof::sm
