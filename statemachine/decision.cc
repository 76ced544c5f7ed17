#include "statemachine/decision.h"

#include <fmt/format.h>

#include "task_payloads.pb.h"

#include "statemachine/device_lease.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/message_json.h"
#include "statemachine/run_kind.h"
#include "statemachine/task_policies.h"
#include "statemachine/task_schema.h"

namespace npuprof::sm {

Decision::Decision(const RunKind& kind, RunState state, int64_t now_ms, std::string cause)
    : kind_(kind), state_(std::move(state)), now_ms_(now_ms), cause_(std::move(cause)) {}

Decided Decision::Take() && { return {std::move(events_), std::move(state_)}; }

void Decision::Emit(const std::string& type, json payload) {
  if (failed()) return;
  if (type == ev::kStateChanged) {
    const std::string from = payload.value("from", state_.state);
    const std::string to = payload.value("to", "");
    if (!kind_.transitions().Allowed(from, to)) {
      status_ = Status::Precondition(fmt::format("illegal transition {} -> {} for run kind {}", from, to,
                                                 kind_.name()));
      return;
    }
  }
  ApplyWith(&kind_, state_, type, payload, state_.last_seq + 1, now_ms_);
  events_.push_back(NewEvent{type, std::move(payload), cause_});
}

void Decision::Transition(const std::string& to, const std::string& reason) {
  json p = {{"from", state_.state}, {"to", to}};
  if (!reason.empty()) p["reason"] = reason;
  Emit(ev::kStateChanged, std::move(p));
}

std::string Decision::ScheduleTask(const std::string& task_kind, json payload, const TaskPolicy& policy) {
  std::string id = fmt::format("{}.t{}", state_.run_id, state_.next_task_no);
  if (Status s = CheckTaskPayload(task_kind, payload); !s.ok())
    refused_tasks_.emplace_back(id, fmt::format("npuprof built a {} task it cannot send: {}; nothing was sent to the "
                                                "machine (a bug in npuprof: please report it)",
                                                task_kind, s.message()));
  Emit(ev::kTaskScheduled, json{{"task_id", id},
                                {"kind", task_kind},
                                {"attempt", 1},
                                {"payload", std::move(payload)},
                                {"policy", TaskPolicyToJson(policy)}});
  return id;
}

std::string Decision::Schedule(const google::protobuf::Message& payload) {
  return Schedule(payload, PolicyFor(state_.kind, TaskKindOf(*payload.GetDescriptor())));
}

std::string Decision::Schedule(const google::protobuf::Message& payload, const TaskPolicy& policy) {
  const std::string task_kind = TaskKindOf(*payload.GetDescriptor());
  if (task_kind.empty()) {
    if (status_.ok())
      status_ = Status::Internal(fmt::format("run {}: {} is no task payload (it has no task_kind)", state_.run_id,
                                             payload.GetDescriptor()->full_name()));
    return "";
  }
  json j = MessageToJson(payload);
  const auto* machine = payload.GetDescriptor()->FindFieldByName("machine");
  if (machine && machine->message_type() == tasks::Machine::descriptor() &&
      !payload.GetReflection()->HasField(payload, machine))
    j["machine"] = state_.spec.value("machine_record", json::object());
  return ScheduleTask(task_kind, std::move(j), policy);
}

std::string Decision::ScheduleTimer(const std::string& purpose, int64_t delay_ms, json payload) {
  std::string id = fmt::format("{}.tm{}", state_.run_id, state_.next_timer_no);
  Emit(ev::kTimerScheduled, json{{"timer_id", id},
                                 {"purpose", purpose},
                                 {"deadline_ms", now_ms_ + delay_ms},
                                 {"payload", std::move(payload)}});
  return id;
}

void Decision::CancelTimer(const std::string& timer_id) {
  Emit(ev::kTimerCancelled, json{{"timer_id", timer_id}});
}

void Decision::WatchRun(const std::string& run_id) { Emit(ev::kWatchRequested, json{{"run_id", run_id}}); }

void Decision::Finish(RunStatus status, const std::string& error) {
  if (status == RunStatus::kRunning) {
    if (status_.ok()) status_ = Status::Internal(fmt::format("run {}: finish with status 'running'", state_.run_id));
    return;
  }
  const std::string name(RunStatusName(status));
  const std::string to = status == RunStatus::kOk ? "completed" : name;
  ReleaseDevices(*this, "run finished");
  if (state_.state != to) Transition(to, error);
  json p = {{"status", name}};
  if (!error.empty()) p["error"] = error;
  Emit(ev::kRunFinished, std::move(p));
}

void Decision::AbandonOutstanding(const std::string& reason) {
  std::vector<std::string> tasks, timers;
  for (const auto& [id, t] : state_.tasks)
    if (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait) tasks.push_back(id);
  for (const auto& [id, t] : state_.timers)
    if (t.armed) timers.push_back(id);
  for (const auto& id : tasks) Emit(ev::kTaskAbandoned, json{{"task_id", id}, {"reason", reason}});
  for (const auto& id : timers) CancelTimer(id);
}

}  // namespace npuprof::sm
