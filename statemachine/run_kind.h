// RunKind: one kind of run (probe, serve, torch-profile, ...) as a pure
// state machine. The engine handles the events common to all kinds (tasks,
// retries, timers, cancellation, recovery) and calls these hooks.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "task_payloads.pb.h"
#include "statemachine/decision.h"
#include "statemachine/device_lease.h"
#include "statemachine/task_failure.h"
#include "statemachine/task_result.h"
#include "statemachine/transition_table.h"

namespace npuprof::sm {

// A run another run asked for (ChildRunRequested): what the broker submits
// under `run_id` (statemachine/child_runs.h).
struct ChildRequest {
  std::string run_id;
  std::string kind;
  json spec;
};

class RunKind {
 public:
  virtual ~RunKind() = default;

  virtual std::string_view name() const = 0;
  virtual const TransitionTable& transitions() const = 0;

  // Checks and normalises a submitted spec (fills defaults). The error names
  // the field and the fix. Nothing has run yet when this fails.
  virtual Status ValidateSpec(json& spec) const = 0;

  // NPUs the run must hold exclusively (nullopt = none). A run that needs
  // some stays "queued" until the broker leases them; OnStart comes after.
  virtual std::optional<DeviceNeed> DevicesNeeded(const RunState& s) const;
  // Called once the run may start: right after RunSubmitted (state "queued"),
  // or after its devices were leased.
  virtual void OnStart(Decision& d) const = 0;
  // The result as recorded and as its message (task_result.h).
  virtual void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const = 0;
  // Called once a task failed for good (retries exhausted or not retryable).
  virtual void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const = 0;
  virtual void OnTimer(Decision& d, const TimerInfo& timer) const;
  // Signals: named inputs from a client (`npuprof stop` sends "stop" with
  // {"force": bool}) or from the broker ("watched_run_finished" with
  // {"run_id","status","state","summary"} once a run this run watches ends).
  // A signal the kind does not accept is refused before anything is recorded.
  virtual bool AcceptsSignal(std::string_view name) const;
  virtual void OnSignal(Decision& d, const std::string& name, const json& payload) const;
  // Called after CancelRequested was applied. Default: abandon and finish cancelled.
  virtual void OnCancel(Decision& d) const;

  // The vLLM service the spec asks for, as the payload of its first
  // service.launch (serve, torch-profile, standalone memory-profile; nullopt
  // for a kind or mode that launches none). The kind schedules its launch
  // from it, and verify compares the argv that ran with the one it gives
  // (statemachine/launch_audit.h).
  virtual std::optional<tasks::ServiceLaunch> SpecService(const RunState& s) const;

  // What child `child_id` of parent is, for a kind whose runs ask for
  // children (ChildRunRequested): the broker submits it. nullopt: the kind
  // does not know that child (the default: a kind that asks for none).
  virtual std::optional<ChildRequest> ChildRequestFor(const RunState& parent, const std::string& child_id) const;

  // Folds a kind-specific event (one the common Apply does not know) into state.
  virtual void ApplyKindEvent(RunState& s, const std::string& type, const json& payload) const;

  // Tasks of `task_kind` / timers of `purpose` that the kind repeats without
  // bound (serve --watch-hbm: one sample every few seconds for days): the
  // fold forgets the ended ones when the next is scheduled, so the state
  // stays the same size however long the run lasts
  // (statemachine/forget_ended.h). Default: nothing is forgotten.
  virtual bool ForgetsEndedTasks(std::string_view task_kind) const;
  virtual bool ForgetsFiredTimers(std::string_view purpose) const;

  // Projections (pure folds). Summary is what `npuprof show` prints.
  virtual json Summary(const RunState& s) const;
  virtual json Manifest(const RunState& s) const;
};

}  // namespace npuprof::sm
