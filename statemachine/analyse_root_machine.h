// The `analyse-root` run kind: the analyse-and-verify step of torch-profile
// alone, on an existing profile root (docs/BEHAVIOUR.md#analyse-root).
//
//   queued -> analysing -> completed | failed;  queued | analysing -> cancelled
#pragma once

#include "statemachine/run_kind.h"

namespace npuprof::sm {

class AnalyseRootMachine : public RunKind {
 public:
  std::string_view name() const override { return "analyse-root"; }
  const TransitionTable& transitions() const override;
  // machine, profile_root (absolute path), expected_ranks (>= 1, required),
  // analyse_timeout_s (1800), tag (optional).
  Status ValidateSpec(json& spec) const override;
  void OnStart(Decision& d) const override;
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const override;
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  json Summary(const RunState& s) const override;
  json Manifest(const RunState& s) const override;
};

}  // namespace npuprof::sm
