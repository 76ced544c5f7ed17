#include "statemachine/run_kind.h"

#include "common/time_util.h"

namespace npuprof::sm {

void RunKind::OnTimer(Decision&, const TimerInfo&) const {}

void RunKind::OnCancel(Decision& d) const {
  d.AbandonOutstanding("run cancelled");
  d.Finish(RunStatus::kCancelled, "cancelled by request");
}

bool RunKind::AcceptsSignal(std::string_view) const { return false; }

void RunKind::OnSignal(Decision&, const std::string&, const json&) const {}

void RunKind::ApplyKindEvent(RunState&, const std::string&, const json&) const {}

bool RunKind::ForgetsEndedTasks(std::string_view) const { return false; }

bool RunKind::ForgetsFiredTimers(std::string_view) const { return false; }

std::optional<DeviceNeed> RunKind::DevicesNeeded(const RunState&) const { return std::nullopt; }

std::optional<tasks::ServiceLaunch> RunKind::SpecService(const RunState&) const { return std::nullopt; }

std::optional<ChildRequest> RunKind::ChildRequestFor(const RunState&, const std::string&) const {
  return std::nullopt;
}

json RunKind::Summary(const RunState& s) const {
  json outstanding = json::array();
  for (const auto& [id, t] : s.tasks) {
    if (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait)
      outstanding.push_back(
          {{"task_id", id}, {"kind", t.kind}, {"attempt", t.attempt}, {"status", TaskStatusName(t.status)}});
  }
  json timers = json::array();
  for (const auto& [id, t] : s.timers)
    if (t.armed) timers.push_back({{"timer_id", id}, {"purpose", t.purpose}, {"deadline", IsoTimeMs(t.deadline_ms)}});
  json j = {{"run_id", s.run_id},
            {"kind", s.kind},
            {"state", s.state},
            {"status", RunStatusName(s.status)},
            {"machine", s.machine},
            {"tag", s.tag},
            {"created_at", IsoTimeMs(s.created_ms)},
            {"updated_at", IsoTimeMs(s.updated_ms)},
            {"finished_at", s.terminal ? json(IsoTimeMs(s.finished_ms)) : json(nullptr)},
            {"error", s.error.empty() ? json(nullptr) : json(s.error)},
            {"outstanding_tasks", outstanding},
            {"armed_timers", timers},
            {"recoveries", s.recoveries},
            {"last_seq", s.last_seq}};
  if (json lease = LeaseSummary(*this, s); !lease.is_null()) j["devices_lease"] = lease;
  return j;
}

json RunKind::Manifest(const RunState& s) const { return Summary(s); }

}  // namespace npuprof::sm
