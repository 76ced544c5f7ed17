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

void ProbeMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const json& result) const {
  json rec = result;
  if (task.result.contains("blobs")) rec["evidence"] = task.result["blobs"];
  d.Emit(kProbeRecorded, rec);
  d.Finish(RunStatus::kOk);
}

void ProbeMachine::OnTaskFailed(Decision& d, const TaskInfo&, const json& failure) const {
  json rec = {{"error_kind", failure.value("error_kind", "")}, {"error", failure.value("error", "")}};
  if (failure.contains("blobs")) rec["evidence"] = failure["blobs"];
  d.Emit(kProbeFailed, rec);
  std::string kind = failure.value("error_kind", "");
  d.Finish(RunStatus::kFailed, kind.empty() ? failure.value("error", "probe failed")
                                           : fmt::format("{}: {}", kind, failure.value("error", "")));
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
