// The `machine-check` run kind behind `npuprof machine check NAME`: connects,
// verifies the host key, reports uname and which Ascend tools are present.
//
//   queued -> checking -> completed | failed ; queued | checking -> cancelled
#pragma once

#include "statemachine/run_kind.h"

namespace npuprof::sm {

inline constexpr const char* kMachineCheckTask = "machine.check";
inline constexpr const char* kMachineChecked = "MachineChecked";

class MachineCheckMachine : public RunKind {
 public:
  std::string_view name() const override { return "machine-check"; }
  const TransitionTable& transitions() const override;
  Status ValidateSpec(json& spec) const override;
  void OnStart(Decision& d) const override;
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const override;
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  json Summary(const RunState& s) const override;
};

}  // namespace npuprof::sm
