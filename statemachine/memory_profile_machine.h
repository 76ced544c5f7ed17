// The `memory-profile` run kind: per-device HBM attribution of a vLLM
// service, with every number traced to the bytes it came from.
//
// Modes (spec "mode"):
//   standalone       preflight (msprof, torch_npu, wrap script) -> baseline
//                    npu-smi -> launch under msprof -> ready -> npu-smi +
//                    logs -> one inference -> npu-smi -> stop -> safetensors
//                    headers -> flush wait (timer) -> detached msprof export
//                    (timeout timer) -> CSV collection -> completed
//   attach           uses a `serve` run's service (spec attach_run): live
//                    phases while it runs (never stops it), then watches the
//                    serve run and, once it has ended, flush -> export -> CSVs
//                    (only when the service ran under a wrap script)
//   install_wrapper  preflight only: writes the msprof wrap script on the
//                    target; its path is in the summary ("wrap_script") for
//                    `npuprof submit serve --wrap-script PATH`
//
// The run is driven by a planner: after every outcome the next missing step
// of the mode's ordered list (memory_profile_steps.h: steps, their skip
// reasons, and the transition table derived from them) is scheduled
// (data.<step> present or data.step_failures.<step> = done); the run's state
// is the step in progress. A failure of a critical step (preflight, baseline,
// launch, readiness, stop) takes the cleanup path: logs (if a service was
// launched), stop, failed.
// A standalone run over several machines (memory_profile_nodes.h) also
// measures every node's clock with the head's launch (clock_offsets.h; the
// collection and the run's end wait for the answer) and cuts each node's
// series at the inference window moved onto that node's clock
// (inference_window.h WindowOnNodeClock); after the inference its stop waits
// one watch poll so that a node lost meanwhile is named.
// Report and manifest are pure folds (memory_report.h, memory_manifest.h).
#pragma once

#include "statemachine/run_kind.h"

namespace npuprof::sm {

// Task kinds (payloads: docs in workers/memory/memory_tasks.h).
inline constexpr const char* kMemPreflightTask = "memory.preflight";
inline constexpr const char* kMemNpuSmiTask = "memory.npu_smi";
inline constexpr const char* kMemLogsTask = "memory.logs";
inline constexpr const char* kMemInferTask = "memory.infer";
inline constexpr const char* kMemExportTask = "memory.export";
inline constexpr const char* kMemCollectTask = "memory.collect_csvs";
inline constexpr const char* kMemWeightsTask = "memory.weights";
inline constexpr const char* kMemWaitFlushTask = "memory.wait_flush";
inline constexpr const char* kMemOperatorMemoryTask = "memory.operator_memory";

// Kind events: the evidence records of memory_profile_events.h (payload ->
// data[field]); the generic form {"field","value"} -> data[field] = value;
// {"step","error_kind","error"} -> data.step_failures[step];
// {"error"} -> data.failure (first one wins).
inline constexpr const char* kMemRecorded = "MemoryEvidenceRecorded";
inline constexpr const char* kMemStepFailed = "MemoryStepFailed";
inline constexpr const char* kMemRunFailing = "MemoryRunFailing";

class MemoryProfileMachine : public RunKind {
 public:
  std::string_view name() const override { return "memory-profile"; }
  const TransitionTable& transitions() const override;
  Status ValidateSpec(json& spec) const override;
  std::optional<DeviceNeed> DevicesNeeded(const RunState& s) const override;
  std::optional<tasks::ServiceLaunch> SpecService(const RunState& s) const override;
  void OnStart(Decision& d) const override;
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const override;
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override;
  void OnTimer(Decision& d, const TimerInfo& timer) const override;
  bool AcceptsSignal(std::string_view name) const override;
  void OnSignal(Decision& d, const std::string& name, const json& payload) const override;
  void OnCancel(Decision& d) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  json Summary(const RunState& s) const override;
  json Manifest(const RunState& s) const override;
};

// The report evidence (memory_report.h input) folded from a run's state.
json MemoryEvidenceFromState(const RunState& s);

}  // namespace npuprof::sm
