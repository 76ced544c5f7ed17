#include "task_payloads.pb.h"
#include "common/json_field.h"
#include "statemachine/probe_machine.h"

#include <fmt/format.h>

#include "statemachine/spec_checks.h"

namespace npuprof::sm {

const TransitionTable& ProbeMachine::transitions() const {
  static const TransitionTable table({{"queued", "probing"},
                                      {"probing", "completed"},
                                      {"probing", "failed"},
                                      {"queued", "failed"},
                                      {"queued", "cancelled"},
                                      {"probing", "cancelled"}},
                                     {"completed", "failed", "cancelled"});
  return table;
}

Status ProbeMachine::ValidateSpec(json& spec) const {
  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  if (Status s = RequireSafeName(spec, "tag", false); !s.ok()) return s;
  if (Status s = RequireMachineRecord(spec); !s.ok()) return s;
  return CheckIntRange(spec, "busy_threshold_mb", 4096, 0, 1 << 30);
}

void ProbeMachine::OnStart(Decision& d) const {
  d.Transition("probing");
  tasks::ProbeNpuSmi p;
  p.set_busy_threshold_mb(IntField(d.state().spec, "busy_threshold_mb").value_or(4096));
  d.Schedule(p);
}

void ProbeMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  // The probe's answer is the run's evidence: recorded as it came.
  json rec = result.recorded();
  if (task.result.contains("blobs")) rec["evidence"] = task.result["blobs"];
  d.Emit(kProbeRecorded, rec);
  d.Finish(RunStatus::kOk);
}

void ProbeMachine::OnTaskFailed(Decision& d, const TaskInfo&, const TaskFailure& failure) const {
  json rec = {{"error_kind", failure.error_kind()}, {"error", failure.error()}};
  if (failure.recorded().contains("blobs")) rec["evidence"] = failure.recorded()["blobs"];
  d.Emit(kProbeFailed, rec);
  d.Finish(RunStatus::kFailed, failure.error_kind().empty() && failure.error().empty() ? "probe failed" : failure.Text());
}

void ProbeMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const {
  if (type == kProbeRecorded) s.data["probe"] = payload;
  if (type == kProbeFailed) s.data["probe_failure"] = payload;
}

json ProbeMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  if (s.data.contains("probe")) j["probe"] = s.data["probe"];
  if (s.data.contains("probe_failure")) j["probe_failure"] = s.data["probe_failure"];
  return j;
}

}  // namespace npuprof::sm
