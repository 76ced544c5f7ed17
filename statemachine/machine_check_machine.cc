#include "task_payloads.pb.h"
#include "statemachine/machine_check_machine.h"

#include <fmt/format.h>

#include "statemachine/spec_checks.h"

namespace npuprof::sm {

const TransitionTable& MachineCheckMachine::transitions() const {
  static const TransitionTable table({{"queued", "checking"},
                                      {"checking", "completed"},
                                      {"checking", "failed"},
                                      {"queued", "cancelled"},
                                      {"checking", "cancelled"}},
                                     {"completed", "failed", "cancelled"});
  return table;
}

Status MachineCheckMachine::ValidateSpec(json& spec) const {
  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  return RequireMachineRecord(spec);
}

void MachineCheckMachine::OnStart(Decision& d) const {
  d.Transition("checking");
  d.Schedule(tasks::MachineCheck());
}

void MachineCheckMachine::OnTaskSucceeded(Decision& d, const TaskInfo&, const TaskResult& result) const {
  d.Emit(kMachineChecked, result.recorded());  // the check's answer, recorded as it came
  d.Finish(RunStatus::kOk);
}

void MachineCheckMachine::OnTaskFailed(Decision& d, const TaskInfo&, const TaskFailure& failure) const {
  d.Finish(RunStatus::kFailed, failure.Classified());
}

void MachineCheckMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const {
  if (type == kMachineChecked) s.data["check"] = payload;
}

json MachineCheckMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  if (s.data.contains("check")) j["check"] = s.data["check"];
  return j;
}

}  // namespace npuprof::sm
