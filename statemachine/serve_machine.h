// The `serve` run kind: starts a vLLM service on a machine and keeps it
// running until `npuprof stop RUN [--force]` (signal "stop"). The service
// state (data.service, shown under "service" by `npuprof show`) is a fold of
// the run's events.
//
//   queued -> launching -> waiting_ready -> ready -> stopping -> completed
//   launching -> failed                 (refused before anything started)
//   launching | waiting_ready | ready -> stopping   (stop, cancel, failure: cleanup)
//   stopping -> completed (user stop) | failed (after a failure) | cancelled
//   stopping -> ready                   (a stop without --force left it running)
//   queued -> completed | failed | cancelled
//
// While ready, a service.watch task polls the service's process group (every
// spec.watch_poll_s, default 10 s; 0 = off) and answers only when it died:
// then ServiceFailed{stage: watch}, a forced stop of what is left, failed
// (and the NPU lease is released). Healthy services cost no events.
//
// A stop or cancel that arrives while the launch task is out waits for its
// result (so the stop knows the pid and nothing is started behind its back),
// then stops. Every path after a launch that may have started a process goes
// through stopping. Priority of the end status: failure > cancel > user stop.
#pragma once

#include "statemachine/run_kind.h"

namespace npuprof::sm {

inline constexpr const char* kServiceLaunched = "ServiceLaunched";
inline constexpr const char* kServiceReady = "ServiceReady";
inline constexpr const char* kServiceFailed = "ServiceFailed";
inline constexpr const char* kServiceStopRequested = "ServiceStopRequested";
inline constexpr const char* kServiceStopped = "ServiceStopped";
inline constexpr const char* kServiceStopFailed = "ServiceStopFailed";

class ServeMachine : public RunKind {
 public:
  std::string_view name() const override { return "serve"; }
  const TransitionTable& transitions() const override;
  Status ValidateSpec(json& spec) const override;
  std::optional<DeviceNeed> DevicesNeeded(const RunState& s) const override;
  std::optional<tasks::ServiceLaunch> SpecService(const RunState& s) const override;
  void OnStart(Decision& d) const override;
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const override;
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override;
  // A task of a multi-node deployment failed for good.
  void OnNodeTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const;
  void OnTimer(Decision& d, const TimerInfo& timer) const override;
  bool AcceptsSignal(std::string_view name) const override;
  void OnSignal(Decision& d, const std::string& name, const json& payload) const override;
  void OnCancel(Decision& d) const override;
  void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const override;
  bool ForgetsEndedTasks(std::string_view task_kind) const override;  // the HBM watch's (serve_hbm_watch.h)
  bool ForgetsFiredTimers(std::string_view purpose) const override;
  json Summary(const RunState& s) const override;
};

}  // namespace npuprof::sm
