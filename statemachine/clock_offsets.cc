#include "statemachine/clock_offsets.h"

#include "task_payloads.pb.h"
#include "statemachine/deployment_service.h"
#include "statemachine/event_types.h"
#include "statemachine/json_message_table.h"
#include "statemachine/task_policies.h"

namespace npuprof::sm {

void ScheduleClock(Decision& d, const std::string& when) {
  const RunState& s = d.state();
  if (NodeCount(s) < 2) return;
  tasks::MachineClock p;
  p.set_when(when);
  for (const json& node : s.spec["nodes"]) {
    if (!node.is_object() || !node.contains("machine_record")) continue;
    tasks::Machine m;
    // The broker copied the inventory's record (a tasks.Machine) into the spec.
    if (JsonMessageTable::Parse(node["machine_record"].dump(), m, /*tolerate_unknown_keys=*/true)) continue;
    *p.add_machines() = std::move(m);
  }
  d.Schedule(p, PolicyFor("deployment", kMachineClockTask));
}

bool IsClockTask(const TaskInfo& task) { return task.kind == kMachineClockTask; }

bool ClockPending(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (IsClockTask(t) && (t.in_flight() || t.status == TaskStatus::kRetryWait)) return true;
  return false;
}

void AbandonPendingClock(Decision& d, const std::string& reason) {
  std::vector<std::string> out;
  for (const auto& [id, t] : d.state().tasks)
    if (IsClockTask(t) && (t.in_flight() || t.status == TaskStatus::kRetryWait)) out.push_back(id);
  for (const auto& id : out) d.Emit(ev::kTaskAbandoned, json{{"task_id", id}, {"reason", reason}});
}

bool OnClockTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) {
  if (!IsClockTask(task)) return false;
  d.Emit(kClockMeasured, result.recorded());
  return true;
}

bool ApplyClockEvent(RunState& s, const std::string& type, const json& p) {
  if (type != kClockMeasured) return false;
  const std::string when = p.is_object() && p.contains("when") && p["when"].is_string() ? p["when"].get<std::string>()
                                                                                          : std::string("start");
  s.data["clock"][when == "end" ? "end" : "start"] = p;
  return true;
}

json ClockProjection(const RunState& s) {
  if (!s.data.contains("clock")) return nullptr;
  const json& c = s.data["clock"];
  return json{{"start", c.value("start", json(nullptr))}, {"end", c.value("end", json(nullptr))}};
}

double ClockOffsetMs(const RunState& s, const std::string& machine) {
  if (!s.data.contains("clock")) return 0;
  for (const char* when : {"start", "end"}) {
    const json m = s.data["clock"].value(when, json(nullptr));
    if (!m.is_object()) continue;
    for (const json& o : m.value("offsets", json::array()))
      if (o.is_object() && o.value("machine", "") == machine && o.contains("offset_ms") && o["offset_ms"].is_number())
        return o["offset_ms"].get<double>();
  }
  return 0;
}

std::optional<MeasuredClock> MeasuredClockOf(const RunState& s, const std::string& machine) {
  if (!s.data.contains("clock") || !s.data["clock"].is_object()) return std::nullopt;
  for (const char* when : {"start", "end"}) {
    const json m = s.data["clock"].value(when, json(nullptr));
    if (!m.is_object() || !m.contains("offsets") || !m["offsets"].is_array()) continue;
    for (const json& o : m["offsets"]) {
      if (!o.is_object() || o.value("machine", "") != machine) continue;
      if (!o.contains("offset_ms") || !o["offset_ms"].is_number() || o.contains("error")) continue;
      const json& u = o.contains("uncertainty_ms") ? o["uncertainty_ms"] : json();
      return MeasuredClock{o["offset_ms"].get<double>(), u.is_number() ? u.get<double>() : 0.0, when};
    }
  }
  return std::nullopt;
}

}  // namespace npuprof::sm
