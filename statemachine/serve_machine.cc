#include "statemachine/serve_machine.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/json_field.h"
#include "kind_data.pb.h"
#include "run_specs.pb.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/deployment_service.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/service_spec.h"
#include "statemachine/spec_checks.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_policies.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

namespace {

constexpr const char* kHealthDeadline = "health_deadline";
// After the watch task gave up (target unreachable for its whole retry
// budget): watch again this much later.
constexpr const char* kWatchAgain = "watch_again";
constexpr int64_t kWatchAgainMs = 30000;
// The readiness task reports a timeout itself; the timer only catches a task
// that never answers, so it fires this long after the deadline.
constexpr int64_t kHealthTimerSlackMs = 30000;
// How often a multi-node deployment's headless nodes are checked alive (from
// their launch on: a node that dies while the head waits for it fails the
// run at once, naming it).
constexpr int64_t kNodeWatchPollS = 2;

// The run's error when service.launch failed before anything was started.
constexpr const char* kNeverLaunched = "the service was never launched (nothing to stop)";

// The run's validated spec (read at the point of use: a lease grant may
// replace the decoded message).
const run_specs::ServeSpec& Spec(const RunState& s) { return SpecOf<run_specs::ServeSpec>(s); }

// What the run has folded of its own events, as its message (decoded at each
// read: a decision reads it a few times at most).
using ServeData = kind_data::ServeData;
ServeData Data(const RunState& s) { return DataOf<ServeData>(s); }

std::optional<int64_t> PidOf(const ServeData::Service& svc) {
  return svc.has_pid() ? std::optional<int64_t>(svc.pid()) : std::nullopt;
}

int ReasonRank(const std::string& r) { return r == "failure" ? 3 : r == "cancel" ? 2 : r == "user" ? 1 : 0; }



// While ready, one service.watch task polls the process group and only
// answers when the service died (zero events while it is healthy).
void StartWatch(Decision& d) {
  const RunState& s = d.state();
  const int64_t poll_s = Spec(s).watch_poll_s();
  if (poll_s <= 0) return;
  const ServeData::Service svc = Data(s).service();
  d.Schedule(BuildWatchPayload(svc.runtime_dir(), PidOf(svc), poll_s), ServeWatchPolicy(poll_s));
}

// Records a stop request, keeping the stronger reason and force.
void RequestStop(Decision& d, const std::string& reason, bool force, bool deferred) {
  const ServeData data = Data(d.state());
  const auto& cur = data.stop();
  const bool has_reason = data.has_stop() && ReasonRank(cur.reason()) >= ReasonRank(reason);
  d.Emit(kServiceStopRequested,
         json{{"reason", has_reason ? cur.reason() : reason}, {"force", force || cur.force()}, {"deferred", deferred}});
}

// Schedules service.stop for what is known of the service (pid may be unknown:
// the handler then reads the runtime dir's pid file).
void ScheduleStop(Decision& d) {
  const RunState& s = d.state();
  const ServeData data = Data(s);
  const ServeData::Service& svc = data.service();
  const TaskInfo* launch = LastTask(s, kServiceLaunchTask);
  // Before ServiceLaunched the service record is absent: the launch payload says where it runs.
  const std::string rt = data.has_service() ? svc.runtime_dir()
                         : launch           ? PayloadOf<tasks::ServiceLaunch>(*launch).runtime_dir()
                                            : "";
  if (s.state != "stopping") d.Transition("stopping", data.stop().reason());
  d.Schedule(BuildStopPayload(rt, PidOf(svc), data.stop().force(), Spec(s).stop_grace_s()));
}

// A multi-node deployment: the stop of every node (all at once); the
// run ends once every node is settled.
void ContinueMultiStop(Decision& d);

void StartStop(Decision& d, const std::string& reason, bool force) {
  RequestStop(d, reason, force, false);
  if (NodeCount(d.state()) > 1) {
    if (d.state().state != "stopping") {
      ScheduleClock(d, "end");  // the deployment's last moment up
      d.Transition("stopping", Data(d.state()).stop().reason());
    }
    return ContinueMultiStop(d);
  }
  ScheduleStop(d);
}

std::string FailureError(const RunState& s) {
  const kind_events::ServiceFailed f = Data(s).failure();
  std::string e = fmt::format("{}: {}", f.kind().empty() ? "error" : f.kind(), f.error());
  const std::string& hint = f.env_hint();
  if (!hint.empty() && e.find(hint) == std::string::npos) e += " (hint: " + hint + ")";
  return e;
}

void FinishByReason(Decision& d, const std::string& extra_error = "");

void ContinueMultiStop(Decision& d) {
  const ServeData data = Data(d.state());
  if (ContinueNodeStops(d, data.stop().force(), Spec(d.state()).stop_grace_s())) return;
  if (ClockPending(d.state())) return;  // the end's clock answers first (AfterClock goes on)
  std::string extra = NodesThatMayStillRun(d.state());
  if (extra.empty() && data.has_failure() && !AllNodesLaunched(d.state())) {
    // Nothing to stop anywhere: some node's launch started nothing.
    bool any = false;
    for (int i = 0; i < NodeCount(d.state()); ++i) any = any || NodeServiceOf(d.state(), i).has_value();
    if (!any) extra = kNeverLaunched;
  }
  FinishByReason(d, extra);
}

// The failure record of node i's task (multi-node only): which node and machine.
void NameNode(json& rec, const RunState& s, const TaskInfo& task) {
  if (NodeCount(s) < 2) return;
  const int node = NodeOfTask(s, task);
  rec["node"] = node;
  rec["machine"] = NodeMachine(s, node);
  if (rec.contains("error") && rec["error"].is_string())
    rec["error"] = fmt::format("node {} ({}): {}", node, NodeMachine(s, node), rec["error"].get<std::string>());
}

// Ends the run after the service is known stopped (or known never started).
void FinishByReason(Decision& d, const std::string& extra_error) {
  const RunState& s = d.state();
  const ServeData data = Data(s);
  const std::string& reason = data.stop().reason();
  const bool failed = data.has_failure();
  std::string err = failed ? FailureError(s) : "";
  if (!extra_error.empty()) err = err.empty() ? extra_error : err + "; " + extra_error;
  if (failed || (!extra_error.empty() && reason != "cancel")) return d.Finish(RunStatus::kFailed, err);
  if (s.cancel_requested || reason == "cancel")
    return d.Finish(RunStatus::kCancelled, err.empty() ? "cancelled by request" : err);
  d.Finish(RunStatus::kOk);
}

// The failure as ServiceFailed records it: its class and sentence, and the
// diagnostics its result carried, copied as they came (the run's evidence).
json FailureRecord(const std::string& stage, const TaskFailure& failure) {
  const json& f = failure.recorded();
  const json& r = Field(f, "result");
  json rec = {{"stage", stage},
              {"kind", failure.error_kind().empty() ? "error" : failure.error_kind()},
              {"error", failure.error()}};
  for (const char* k : {"stderr_tail", "stdout_tail", "env_hint", "env_errors", "last_health", "free_devices",
                        "busy_devices", "exit_hint"})
    if (r.is_object() && r.contains(k)) rec[k] = r[k];
  if (f.contains("blobs")) rec["evidence"] = f["blobs"];
  return rec;
}

}  // namespace

const TransitionTable& ServeMachine::transitions() const {
  static const TransitionTable table({{"queued", "launching"},
                                      {"queued", "completed"},
                                      {"queued", "failed"},
                                      {"queued", "cancelled"},
                                      {"launching", "waiting_ready"},
                                      {"launching", "stopping"},
                                      {"launching", "failed"},
                                      {"launching", "cancelled"},
                                      {"waiting_ready", "ready"},
                                      {"waiting_ready", "stopping"},
                                      {"ready", "stopping"},
                                      {"stopping", "completed"},
                                      {"stopping", "failed"},
                                      {"stopping", "cancelled"},
                                      {"stopping", "ready"}},
                                     {"completed", "failed", "cancelled"});
  return table;
}

Status ServeMachine::ValidateSpec(json& spec) const {
  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  if (Status s = RequireSafeName(spec, "tag", false); !s.ok()) return s;
  if (Status s = RequireMachineRecord(spec); !s.ok()) return s;
  // watch_poll_s: how often a ready service's process is checked (0 = never).
  if (Status s = CheckIntRange(spec, "watch_poll_s", 10, 0, 3600); !s.ok()) return s;
  // watch_hbm_s: how often a ready service's HBM is sampled (0 = never; serve_hbm_watch.h).
  // Only when given: a spec without it stays as it was (0 = off).
  if (spec.contains("watch_hbm_s")) {
    if (Status s = CheckHbmWatchInterval(spec); !s.ok()) return s;
    if (spec["watch_hbm_s"].get<double>() > 0 && spec.contains("nodes") && spec["nodes"].is_array() &&
        !spec["nodes"].empty())
      return Status::Invalid("watch_hbm_s: --watch-hbm watches a one-node service; drop it or --nodes");
  }
  if (spec.contains("watch_workload")) {
    if (!spec["watch_workload"].is_boolean())
      return Status::Invalid("watch_workload must be true or false (CLI: --watch-workload)");
    if (spec["watch_workload"].get<bool>() && !(spec.contains("watch_hbm_s") && spec["watch_hbm_s"].is_number() &&
                                                spec["watch_hbm_s"].get<double>() > 0))
      return Status::Invalid("watch_workload: --watch-workload sends its wave before each HBM sample: give "
                             "--watch-hbm SECONDS too");
  }
  return ValidateServiceSpec(spec, name());
}

std::optional<DeviceNeed> ServeMachine::DevicesNeeded(const RunState& s) const { return ServiceDeviceNeed(s, Spec(s)); }

std::optional<tasks::ServiceLaunch> ServeMachine::SpecService(const RunState& s) const {
  return BuildLaunchPayload(s.run_id, 1, Spec(s));
}

void ServeMachine::OnStart(Decision& d) const {
  d.Transition("launching");
  if (NodeCount(d.state()) > 1) {
    const run_specs::ServeSpec spec = Spec(d.state());
    const std::string run_id = d.state().run_id;
    LaunchAllNodes(d, DeploymentRpcPort(spec, run_id), [&](int node, std::optional<int32_t> port) {
      return BuildNodeLaunchPayload(run_id, 1, spec, node, port);
    });
    ScheduleClock(d, "start");
    return;
  }
  d.Schedule(*SpecService(d.state()));
}

namespace {

// A multi-node deployment's launch answered on some node: stop when asked
// to, and wait for readiness once every node is up (every node was launched
// at once; a run launched head-first launches the others now).
void AfterNodeLaunched(Decision& d, const TaskInfo& task, const TaskResult& result) {
  const RunState& s = d.state();
  const ServeData data = Data(s);
  if (s.cancel_requested || data.has_stop() || data.has_failure()) {
    const std::string& asked = data.stop().reason().empty() ? "user" : data.stop().reason();
    return StartStop(d, data.has_failure() ? "failure" : s.cancel_requested ? "cancel" : asked,
                     s.cancel_requested || data.stop().force() || data.has_failure());
  }
  if (NodeOfTask(s, task) == 0) {
    const auto& launched = result.Required<results::ServiceLaunchResult>();
    const run_specs::ServeSpec spec = Spec(s);
    const std::string run_id = s.run_id;
    LaunchHeadlessNodes(d, launched, [&](int node, std::optional<int32_t> port) {
      return BuildNodeLaunchPayload(run_id, 1, spec, node, port);
    });
  }
  if (!AllNodesLaunched(d.state())) return;
  // Every node is up: ready means the head's API answers (its front end
  // waits for every engine to join), while every headless node is watched.
  const TaskInfo* head = LastNodeTask(d.state(), kServiceLaunchTask, 0);
  d.Transition("waiting_ready");
  const tasks::ServiceWaitReady wait =
      BuildWaitReadyPayload(PayloadOf<tasks::ServiceLaunch>(*head), RecordedOf<results::ServiceLaunchResult>(*head),
                            d.now_ms());
  d.Schedule(wait);
  d.ScheduleTimer(kHealthDeadline, wait.health_timeout_s() * 1000 + kHealthTimerSlackMs);
  WatchNodes(d, 1, kNodeWatchPollS);
}

}  // namespace

namespace {
// A clock answer during a multi-node stop: the stop may have been waiting for it.
void AfterClock(Decision& d) {
  if (d.state().state == "stopping" && NodeCount(d.state()) > 1 && !d.state().terminal) ContinueMultiStop(d);
}
}  // namespace

void ServeMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  if (OnClockTaskSucceeded(d, task, result)) return AfterClock(d);
  if (OnHbmSampleSucceeded(d, task, result)) return;
  if (task.kind == kServiceLaunchTask) {
    json rec = ServiceRecordFromLaunch(task.payload, result.recorded());
    if (task.result.contains("blobs")) rec["evidence"] = task.result["blobs"];
    if (NodeCount(d.state()) > 1) {
      NameNode(rec, d.state(), task);
      const json& r = result.recorded();
      if (r.contains("deployment") && r["deployment"].is_object()) rec["deployment"] = r["deployment"];
      d.Emit(kServiceLaunched, rec);
      return AfterNodeLaunched(d, task, result);
    }
    d.Emit(kServiceLaunched, rec);
    const ServeData data = Data(d.state());
    if (d.state().cancel_requested || data.has_stop()) {
      const std::string& asked = data.stop().reason().empty() ? "user" : data.stop().reason();
      return StartStop(d, d.state().cancel_requested ? "cancel" : asked,
                       d.state().cancel_requested || data.stop().force());
    }
    d.Transition("waiting_ready");
    const tasks::ServiceWaitReady wait =
        BuildWaitReadyPayload(PayloadOf<tasks::ServiceLaunch>(task), result.Required<results::ServiceLaunchResult>(),
                              d.now_ms());
    d.Schedule(wait);
    d.ScheduleTimer(kHealthDeadline, wait.health_timeout_s() * 1000 + kHealthTimerSlackMs);
    return;
  }
  if (task.kind == kServiceWaitReadyTask) {
    if (d.state().state != "waiting_ready") return;
    for (const auto& [id, t] : d.state().timers)
      if (t.armed && t.purpose == kHealthDeadline) d.CancelTimer(id);
    d.Emit(kServiceReady, result.recorded());
    d.Transition("ready");
    StartWatch(d);
    StartHbmWatch(d);
    return;
  }
  if (task.kind == kServiceWatchTask) {
    // The watch ended without a death (it only does so when cancelled): watch again if still ready.
    if (NodeCount(d.state()) > 1) {
      const int node = NodeOfTask(d.state(), task);
      if (d.state().state == "ready" || (node > 0 && d.state().state == "waiting_ready")) {
        if (node == 0) StartWatch(d);
        else WatchNodes(d, node, kNodeWatchPollS);
      }
      return;
    }
    if (d.state().state == "ready") StartWatch(d);
    return;
  }
  if (task.kind == kServiceStopTask) {
    json rec = result.recorded();
    if (task.result.contains("blobs")) rec["evidence"] = task.result["blobs"];
    if (NodeCount(d.state()) > 1) {
      const int node = NodeOfTask(d.state(), task);
      rec["node"] = node;
      rec["machine"] = NodeMachine(d.state(), node);
      d.Emit(kServiceStopped, rec);
      return ContinueMultiStop(d);
    }
    d.Emit(kServiceStopped, rec);
    const bool never = result.As<results::ServiceStopResult>().never_started() && Data(d.state()).has_failure();
    FinishByReason(d, never ? kNeverLaunched : "");
  }
}

void ServeMachine::OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  if (OnHbmSampleFailed(d, task)) return;
  if (NodeCount(d.state()) > 1) return OnNodeTaskFailed(d, task, failure);
  if (task.kind == kServiceLaunchTask) {
    d.Emit(kServiceFailed, FailureRecord("launch", failure));
    if (LaunchStartedNothing(task)) return FinishByReason(d, kNeverLaunched);  // no stop: there is nothing to stop
    return StartStop(d, "failure", true);  // the process may exist: clean up
  }
  if (task.kind == kServiceWaitReadyTask) {
    if (d.state().state != "waiting_ready") return;
    d.AbandonOutstanding("readiness failed");
    d.Emit(kServiceFailed, FailureRecord("wait_ready", failure));
    return StartStop(d, "failure", true);
  }
  if (task.kind == kServiceWatchTask) {
    if (d.state().state != "ready") return;
    const std::string& kind = failure.error_kind();
    if (kind == "service_died" || kind == "environment") {
      // Died while ready: record it, clean up what is left of the group, end failed (the lease goes with it).
      d.Emit(kServiceFailed, FailureRecord("watch", failure));
      return StartStop(d, "failure", true);
    }
    d.ScheduleTimer(kWatchAgain, kWatchAgainMs);  // e.g. target unreachable for the whole retry budget
    return;
  }
  if (task.kind == kServiceStopTask) {
    const auto asked = PayloadOf<tasks::ServiceStop>(task);
    d.Emit(kServiceStopFailed,
           json{{"error_kind", failure.error_kind()}, {"error", failure.error()},
                {"force", asked.force()},
                {"result", failure.recorded().value("result", json(nullptr))}});
    const ServeData data = Data(d.state());
    // A stronger stop (force) was asked for while this one ran: do it now.
    if (data.stop().force() && !asked.force()) return ScheduleStop(d);
    if (data.stop().reason() == "user" && !d.state().cancel_requested) {
      d.Transition("ready", "stop did not end the service: " + failure.error());
      StartHbmWatch(d);
      return;
    }
    const std::string which = data.service().has_pid()
                                  ? fmt::format("the service (pid {})", data.service().pid())
                                  : fmt::format("a service in {} (pid unknown)", asked.runtime_dir());
    FinishByReason(d, fmt::format("{} may still be running: {}", which, failure.Classified()));
  }
}

void ServeMachine::OnNodeTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  const RunState& s = d.state();
  if (IsClockTask(task)) return AfterClock(d);  // no offsets then; the run goes on
  const int node = NodeOfTask(s, task);
  const auto fail = [&](const char* stage) {
    json rec = FailureRecord(stage, failure);
    NameNode(rec, s, task);
    d.Emit(kServiceFailed, rec);
    StartStop(d, "failure", true);
  };
  if (task.kind == kServiceLaunchTask) {
    if (Data(s).has_failure() || s.state == "stopping") {
      // Another node failed first: this launch's answer only matters to the stop.
      return StartStop(d, Data(s).stop().reason().empty() ? "failure" : Data(s).stop().reason(), true);
    }
    return fail("launch");
  }
  if (task.kind == kServiceWaitReadyTask) {
    if (s.state != "waiting_ready") return;
    d.AbandonOutstanding("readiness failed");
    return fail("wait_ready");
  }
  if (task.kind == kServiceWatchTask) {
    const std::string& kind = failure.error_kind();
    const bool watched = s.state == "ready" || (node > 0 && s.state == "waiting_ready");
    if (!watched) return;
    if (kind == "service_died" || kind == "environment") {
      // A node died: the deployment is broken; stop every other node.
      d.AbandonOutstanding(fmt::format("node {} ({}) died", node, NodeMachine(s, node)));
      return fail("watch");
    }
    d.ScheduleTimer(kWatchAgain, kWatchAgainMs);  // e.g. target unreachable for the whole retry budget
    return;
  }
  if (task.kind == kServiceStopTask) {
    const auto asked = PayloadOf<tasks::ServiceStop>(task);
    d.Emit(kServiceStopFailed,
           json{{"error_kind", failure.error_kind()}, {"error", failure.error()}, {"force", asked.force()},
                {"result", failure.recorded().value("result", json(nullptr))}, {"node", node},
                {"machine", NodeMachine(s, node)}});
    // An unforced stop that failed is tried again with force; a forced one
    // that failed leaves that node's devices in quarantine.
    return ContinueMultiStop(d);
  }
}

void ServeMachine::OnTimer(Decision& d, const TimerInfo& timer) const {
  if (OnHbmSampleTimer(d, timer)) return;
  if (timer.purpose == kWatchAgain) {
    if (d.state().state == "ready") {
      StartWatch(d);
      if (NodeCount(d.state()) > 1) WatchNodes(d, 1, kNodeWatchPollS);
    }
    return;
  }
  if (timer.purpose != kHealthDeadline || d.state().state != "waiting_ready") return;
  d.AbandonOutstanding("readiness deadline passed");
  d.Emit(kServiceFailed, json{{"stage", "wait_ready"},
                              {"kind", "never_ready"},
                              {"error", fmt::format("no readiness verdict within {} s (+{} s)",
                                                    Spec(d.state()).health_timeout_s(),
                                                    kHealthTimerSlackMs / 1000)}});
  StartStop(d, "failure", true);
}

bool ServeMachine::AcceptsSignal(std::string_view name) const { return name == "stop"; }

void ServeMachine::OnSignal(Decision& d, const std::string& name, const json& payload) const {
  if (name != "stop") return;
  const bool force = payload.value("force", false);
  const std::string& st = d.state().state;
  if (st == "queued") return d.Finish(RunStatus::kOk);
  if (st == "launching") return RequestStop(d, "user", force, true);
  if (st == "waiting_ready" || st == "ready") {
    d.AbandonOutstanding("stop requested");
    return StartStop(d, "user", force);
  }
  if (st == "stopping" && force && !Data(d.state()).stop().force())
    RequestStop(d, "user", true, false);  // used when the running stop does not end it
}

void ServeMachine::OnCancel(Decision& d) const {
  const std::string& st = d.state().state;
  if (st == "queued") return RunKind::OnCancel(d);
  if (st == "launching") return RequestStop(d, "cancel", true, true);
  if (st == "waiting_ready" || st == "ready") {
    d.AbandonOutstanding("run cancelled");
    return StartStop(d, "cancel", true);
  }
  if (st == "stopping") RequestStop(d, "cancel", true, false);
}

namespace {

// A multi-node deployment's event about node i >= 1 (its payload's `node`):
// that node's record in data.nodes, created by its ServiceLaunched.
void ApplyNodeEvent(RunState& s, const std::string& type, const json& p, int64_t node) {
  json& nodes = s.data["nodes"];
  if (!nodes.is_array()) nodes = json::array();
  json* rec = nullptr;
  for (json& n : nodes)
    if (n.is_object() && n.value("node", int64_t{0}) == node) rec = &n;
  if (type == kServiceLaunched) {
    if (rec) *rec = p;
    else nodes.push_back(p);
    return;
  }
  if (type == kServiceFailed) s.data["failure"] = p;
  if (type == kServiceStopFailed) s.data["stop_error"] = p;
  if (!rec) return;
  if (type == kServiceFailed) {
    (*rec)["status"] = "failed";
    (*rec)["failure"] = p;
  } else if (type == kServiceStopped) {
    if (rec->value("status", "") != "failed") (*rec)["status"] = "stopped";
    (*rec)["stop_result"] = p;
  } else if (type == kServiceStopFailed) {
    (*rec)["stop_error"] = p;
  }
}

}  // namespace

bool ServeMachine::ForgetsEndedTasks(std::string_view task_kind) const { return HbmWatchForgetsTask(task_kind); }

bool ServeMachine::ForgetsFiredTimers(std::string_view purpose) const { return purpose == kHbmSampleTimer; }

void ServeMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& p) const {
  if (ApplyClockEvent(s, type, p)) return;
  if (type == kHbmSampled) return ApplyHbmSampled(s, p);
  const json& node_field = p.is_object() && p.contains("node") ? p["node"] : json(nullptr);
  if (node_field.is_number_integer() && node_field.get<int64_t>() > 0)
    return ApplyNodeEvent(s, type, p, node_field.get<int64_t>());
  json& svc = s.data["service"];
  if (type == kServiceLaunched) {
    svc = p;
  } else if (type == kServiceReady) {
    if (svc.is_object()) {
      svc["status"] = "ready";
      svc["ready"] = p;
    }
    // The head answers once every node's engines joined: the deployment is ready.
    if (s.data.contains("nodes") && s.data["nodes"].is_array())
      for (json& n : s.data["nodes"])
        if (n.is_object() && n.value("status", "") == "starting") n["status"] = "ready";
  } else if (type == kServiceFailed) {
    s.data["failure"] = p;
    if (svc.is_object()) {
      svc["status"] = "failed";
      svc["failure"] = p;
    }
  } else if (type == kServiceStopRequested) {
    s.data["stop"] = p;
    if (svc.is_object() && svc.value("status", "") != "failed" && !p.value("deferred", false)) svc["status"] = "stopping";
    if (s.data.contains("nodes") && s.data["nodes"].is_array() && !p.value("deferred", false))
      for (json& n : s.data["nodes"])
        if (n.is_object() && n.value("status", "") != "failed" && n.value("status", "") != "stopped")
          n["status"] = "stopping";
  } else if (type == kServiceStopped) {
    if (svc.is_object()) {
      if (svc.value("status", "") != "failed") svc["status"] = "stopped";
      svc["stop_result"] = p;
    }
    s.data.erase("stop_error");
  } else if (type == kServiceStopFailed) {
    s.data["stop_error"] = p;
    if (svc.is_object()) svc["stop_error"] = p;
    if (svc.is_object() && svc.value("status", "") == "stopping" && s.data["stop"].value("reason", "") == "user")
      svc["status"] = "ready";
  }
  if (svc.is_null()) s.data.erase("service");
}

json ServeMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  j["service"] = s.data.value("service", json(nullptr));
  if (s.data.contains("nodes")) j["nodes"] = s.data["nodes"];
  if (s.data.contains("clock")) j["clock"] = ClockProjection(s);
  if (s.data.contains("failure")) j["failure"] = s.data["failure"];
  if (s.data.contains("stop")) j["stop_request"] = s.data["stop"];
  if (json w = HbmWatchSummary(s, Spec(s).watch_hbm_s()); !w.is_null()) j["hbm_watch"] = std::move(w);
  return j;
}

void RegisterServeKind(KindRegistry& r) { r.Register(std::make_unique<ServeMachine>()); }

}  // namespace npuprof::sm
