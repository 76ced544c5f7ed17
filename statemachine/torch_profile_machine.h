// The `torch-profile` run kind (docs/BEHAVIOUR.md#tp-steps): launch a profiled vLLM
// service, bracket a workload with /start_profile and /stop_profile, wait
// until torch_npu has finalised every rank (torch_profile.wait_flush, after
// an optional minimum timer of flush_seconds), stop the service, analyse every *_ascend_pt and apply the two gates.
//
//   queued -> [preparing_image ->] [capture_check ->] launching -> ready -> profiling -> workload
//     -> stopping_profile -> flush -> stopping_service -> analysing
//     -> completed | failed
// Any failure after the launch goes to stopping_service (graceful stop, then
// forced) before failed; cancel does the same and ends cancelled.
#pragma once

#include "statemachine/run_kind.h"

namespace npuprof::sm {

// Kind-specific events.
inline constexpr const char* kTpStepFailed = "TorchProfileStepFailed";   // {step, error_kind, error}
inline constexpr const char* kTpWorkloadGated = "WorkloadGated";         // {workload_status}
inline constexpr const char* kTpCleanupStarted = "CleanupStarted";       // {reason}
inline constexpr const char* kTpAnalysisGated = "AnalysisGated";         // {analysis_status, rank_count, expected_ranks}
// {signal, flush_timed_out, waited_ms, min_wait_s, ...}: how the wait for the
// profiler's flush after /stop_profile ended (data.flush).
inline constexpr const char* kTpFlushWaited = "TorchProfileFlushWaited";
// The capture check's verdict and estimate (data.capture_check;
// statemachine/torch_profile_capture.h).
inline constexpr const char* kTpCaptureChecked = "CaptureChecked";

// After the listing: "" or the sentence saying the raw data measured by the
// listing outgrew the capture check's estimate (summary and manifest).
std::string CaptureBudgetNote(const RunState& s);

class TorchProfileMachine : public RunKind {
 public:
  std::string_view name() const override { return "torch-profile"; }
  const TransitionTable& transitions() const override;
  Status ValidateSpec(json& spec) const override;
  std::optional<DeviceNeed> DevicesNeeded(const RunState& s) const override;
  std::optional<tasks::ServiceLaunch> SpecService(const RunState& s) const override;
  void OnStart(Decision& d) const override;
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const override;
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override;
  void OnTimer(Decision& d, const TimerInfo& timer) const override;
  void OnCancel(Decision& d) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  json Summary(const RunState& s) const override;
  json Manifest(const RunState& s) const override;
};

}  // namespace npuprof::sm
