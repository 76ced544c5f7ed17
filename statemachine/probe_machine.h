// The `probe` run kind: runs `npu-smi info` on a machine, keeps the raw
// text as evidence, records devices, HBM, processes and free/busy devices.
//
//   queued -> probing -> completed | failed
//   queued | probing -> cancelled
#pragma once

#include "statemachine/run_kind.h"

namespace npuprof::sm {

inline constexpr const char* kProbeTask = "probe.npu_smi";
inline constexpr const char* kProbeRecorded = "ProbeRecorded";
inline constexpr const char* kProbeFailed = "ProbeFailed";

class ProbeMachine : public RunKind {
 public:
  std::string_view name() const override { return "probe"; }
  const TransitionTable& transitions() const override;
  Status ValidateSpec(json& spec) const override;
  void OnStart(Decision& d) const override;
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const override;
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  json Summary(const RunState& s) const override;
};

}  // namespace npuprof::sm
