#include "statemachine/torch_profile_machine.h"

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "common/json_field.h"
#include "kind_data.pb.h"
#include "run_specs.pb.h"

#include "statemachine/analyse_root_machine.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/deployment_service.h"
#include "statemachine/event_types.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/task_payload.h"
#include "statemachine/torch_profile_analysis.h"
#include "statemachine/torch_profile_capture.h"
#include "statemachine/torch_profile_gates.h"
#include "statemachine/torch_profile_manifest.h"
#include "statemachine/torch_profile_spec.h"
#include "statemachine/torch_profile_tasks.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

namespace {

// The run's validated spec (read at the point of use: a lease grant may
// replace the decoded message).
const run_specs::TorchProfileSpec& Spec(const RunState& s) { return SpecOf<run_specs::TorchProfileSpec>(s); }

// Why a profile control step failed: the HTTP status it answered, or that no
// answer came (and the worker's reason).
std::string ControlRefusal(const std::string& endpoint, const results::TorchProfileControlResult& control) {
  if (control.status().has_number_value())
    return fmt::format("{} answered HTTP {}", endpoint, static_cast<int64_t>(control.status().number_value()));
  return fmt::format("{} got no answer{}", endpoint, control.error().empty() ? "" : ": " + control.error());
}

// Which control or request step a task was ("start_profile", "wave", ...):
// its payload's role; "" for any other task.
std::string RoleOf(const TaskInfo& task) {
  if (task.kind == kTpControlTask) return PayloadOf<tasks::TorchProfileControl>(task).role();
  if (task.kind == kTpRequestsTask) return PayloadOf<tasks::TorchProfileRequests>(task).role();
  return "";
}

// The service the run started, as far as it is known.
struct KnownService {
  std::string runtime_dir;
  std::optional<int64_t> pid;   // unknown: service.stop reads <runtime>/pid
  std::optional<int64_t> port;  // unknown when the launch record has none
};

// The service to stop: the launch result; for a failed launch that may have
// started something (anything but started=false), the payload's runtime dir
// with the pid unknown. nullopt when no service can be running.
// A multi-node deployment: the head's (node 0's).
std::optional<KnownService> ServiceOf(const RunState& s) {
  const TaskInfo* launch = LastNodeTask(s, kServiceLaunchTask, 0);
  if (!launch) return std::nullopt;
  if (TaskResultData(launch).is_object()) {
    const auto r = RecordedOf<results::ServiceLaunchResult>(*launch);
    KnownService k{r.runtime_dir(), std::nullopt, std::nullopt};
    if (r.pid() != 0) k.pid = r.pid();
    if (r.port().has_number_value()) k.port = static_cast<int64_t>(r.port().number_value());
    return k;
  }
  if (launch->status != TaskStatus::kFailed) return std::nullopt;
  if (LaunchStartedNothing(*launch)) return std::nullopt;
  return KnownService{PayloadOf<tasks::ServiceLaunch>(*launch).runtime_dir(), std::nullopt, std::nullopt};
}

bool Multi(const RunState& s) { return NodeCount(s) > 1; }

// --analyse-parallel when the spec sets it.
std::optional<int64_t> AnalyseParallel(const RunState& s) {
  return Spec(s).has_analyse_parallel() ? std::optional<int64_t>(Spec(s).analyse_parallel()) : std::nullopt;
}

// One node: its last stop confirmed it. Several: every node that may have
// run a service confirmed it stopped.
bool ServiceStopped(const RunState& s) {
  if (Multi(s)) {
    for (int i = 0; i < NodeCount(s); ++i)
      if (NodeServiceOf(s, i) && !NodeStopConfirmed(s, i)) return false;
    return true;
  }
  const TaskInfo* stop = LastTask(s, kServiceStopTask);
  if (!TaskResultData(stop).is_object()) return false;
  const auto r = RecordedOf<results::ServiceStopResult>(*stop);
  return r.stopped() || r.already_gone();
}

bool Pending(const TaskInfo* t) { return t && (t->in_flight() || t->status == TaskStatus::kRetryWait); }

void StepFailed(Decision& d, const std::string& step, const std::string& kind, const std::string& error) {
  d.Emit(kTpStepFailed, json{{"step", step}, {"error_kind", kind}, {"error", error}});
}

// A multi-node deployment: the next step of the node-by-node stop (true
// while something is still out).
bool ContinueStops(Decision& d, bool force) {
  return ContinueNodeStops(d, force, Spec(d.state()).stop_grace_s());
}

void ScheduleStop(Decision& d, bool force) {
  if (Multi(d.state())) {
    EndNodeWatches(d);
    ContinueStops(d, force);
    return;
  }
  const KnownService svc = ServiceOf(d.state()).value_or(KnownService{});
  d.Schedule(BuildStopPayload(svc.runtime_dir, svc.pid, force,
                              Spec(d.state()).stop_grace_s()));
}

// The run's error from recorded step failures and tripped gates.
std::string RunError(const RunState& s) {
  const auto data = DataOf<kind_data::TorchProfileData>(s);
  std::vector<std::string> parts;
  for (const auto& e : data.errors())
    parts.push_back(e.error_kind().empty() ? fmt::format("{}: {}", e.step(), e.error())
                                           : fmt::format("{}: {}: {}", e.step(), e.error_kind(), e.error()));
  const std::string& ws = data.workload_status().status();
  const std::string& as = data.analysis_status().string_value();  // null: no verdict
  bool gate = false;
  if (!ws.empty() && ws != "ok") {
    parts.push_back("workload gate: " + ws);
    gate = true;
  }
  if (!as.empty() && as != "ok") {
    parts.push_back("analysis gate: " + as + (data.analysis_detail().empty() ? "" : " (" + data.analysis_detail() + ")"));
    gate = true;
  }
  if (gate) parts.push_back("re-collect required");
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Cleanup of a multi-node deployment, one step: stop what may run on every
// node; end once every node is settled.
void ContinueCleanup(Decision& d) {
  EndNodeWatches(d);
  if (ContinueStops(d, false)) {
    if (d.state().state != "stopping_service") d.Transition("stopping_service", "cleanup");
    return;
  }
  AbandonPendingClock(d, "the run ends");
  const RunState& s = d.state();
  if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
  std::string error = RunError(s);
  for (const std::string& gone : NodesGoneBeforeTheStop(s)) error += (error.empty() ? "" : "; ") + gone;
  d.Finish(RunStatus::kFailed, error);
}

// Starts cleanup: stop the service if one is known, else end now.
void BeginCleanup(Decision& d, const std::string& reason) {
  d.Emit(kTpCleanupStarted, json{{"reason", reason}});
  if (Multi(d.state())) return ContinueCleanup(d);
  const RunState& s = d.state();
  if (Pending(LastTask(s, kServiceStopTask))) return;  // a stop is already on its way
  if (ServiceOf(s) && !ServiceStopped(s)) {
    if (s.state != "stopping_service") d.Transition("stopping_service", reason);
    ScheduleStop(d, false);
    return;
  }
  if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
  d.Finish(RunStatus::kFailed, RunError(d.state()));
}

void StartLaunch(Decision& d) {
  // The capture check first, when the spec asks for it and it has not run.
  if (CaptureCheckWanted(Spec(d.state())) && LastTask(d.state(), kTpCaptureCheckTask) == nullptr) {
    d.Transition("capture_check");
    const run_specs::TorchProfileSpec& spec = Spec(d.state());
    tasks::TorchProfileCaptureCheck p;
    p.set_runtime_dir(TorchProfileLaunchPayload(d.state().run_id, spec).runtime_dir());
    p.set_model(spec.model());
    p.set_profiler_fields(!RequiredProfilerFields(spec).empty());
    d.Schedule(p);
    return;
  }
  d.Transition("launching");
  const run_specs::TorchProfileSpec spec = Spec(d.state());
  const std::string run_id = d.state().run_id;
  if (NodeCount(d.state()) > 1) {
    // Every node at once, each told the deployment's RPC port.
    LaunchAllNodes(d, DeploymentRpcPort(spec, run_id), [&](int node, std::optional<int32_t> port) {
      return TorchProfileLaunchPayload(run_id, spec, node, port);
    });
  } else {
    d.Schedule(TorchProfileLaunchPayload(run_id, spec));  // = SpecService for one node
  }
}

// How often a multi-node deployment's headless nodes are checked alive
// while the run uses them (a death fails the run, naming the node).
constexpr int64_t kNodeWatchPollS = 2;

void ScheduleControl(Decision& d, const std::string& action) {
  const KnownService svc = ServiceOf(d.state()).value_or(KnownService{});
  tasks::TorchProfileControl p;
  p.set_role(action);
  p.set_action(action);
  p.set_port(static_cast<int32_t>(svc.port.value_or(0)));
  p.set_timeout_s(Spec(d.state()).profile_control_timeout());
  d.Schedule(p);
}

void ScheduleRequests(Decision& d, const std::string& role) {
  const run_specs::TorchProfileSpec& spec = Spec(d.state());
  const KnownService svc = ServiceOf(d.state()).value_or(KnownService{});
  const bool wave = role == "wave";
  tasks::TorchProfileRequests p;
  p.set_role(role);
  p.set_port(static_cast<int32_t>(svc.port.value_or(0)));
  p.set_served_model_name(spec.served_model_name());
  p.set_total(wave ? spec.benchmark_total_requests() : 1);
  p.set_concurrency(wave ? spec.benchmark_concurrency() : 1);
  p.set_first_index(wave ? 0 : spec.benchmark_total_requests());
  p.set_prompt_tokens(spec.prompt_tokens());
  p.set_max_tokens(wave ? spec.benchmark_output_tokens() : spec.followup_output_tokens());
  p.set_timeout_s(spec.request_timeout());
  p.set_request_kind(spec.request_kind());
  if (spec.has_image_path()) p.set_image_path(spec.image_path());
  p.set_image_height(spec.image_height());
  d.Schedule(p);
}

std::string ProfileRoot(const RunState& s) {
  return ServiceOf(s).value_or(KnownService{}).runtime_dir + "/" + Spec(s).torch_profiler_dir();
}

// Node i's profile root (the head's for one node).
std::string NodeProfileRoot(const RunState& s, int node) {
  const auto svc = NodeServiceOf(s, node);
  return (svc ? svc->runtime_dir : std::string()) + "/" + Spec(s).torch_profiler_dir();
}

// A multi-node run's connections warmed ahead per node (AnalyseWarmSessions).
int64_t NodeWarmSessions(const RunState& s) {
  return AnalyseWarmSessions(Spec(s).tp() * DpLocal(Spec(s)), AnalyseParallel(s));
}

// Polls until torch_npu has finalised every rank (the task's deadline is
// fixed here, so a re-dispatched wait keeps the same end). Several nodes:
// one wait per node, on that node, for its own ranks, all at once.
void ScheduleFlushWait(Decision& d) {
  const RunState& s = d.state();
  const int64_t timeout_s = Spec(s).flush_timeout();
  if (Multi(s)) {
    const int per_node = static_cast<int>(Spec(s).tp() * DpLocal(Spec(s)));
    for (int i = 0; i < NodeCount(s); ++i) {
      tasks::TorchProfileWaitFlush p;
      p.set_profile_root(NodeProfileRoot(d.state(), i));
      p.set_expected_ranks(per_node);
      p.set_warm_sessions(AnalyseWarmSessions(per_node, AnalyseParallel(s)));
      p.set_timeout_s(timeout_s);
      p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
      if (const auto svc = NodeServiceOf(d.state(), i)) *p.mutable_machine() = svc->record;
      d.Schedule(p);
    }
    return;
  }
  tasks::TorchProfileWaitFlush p;
  p.set_profile_root(ProfileRoot(s));
  p.set_expected_ranks(ExpectedRanks(Spec(s)));
  p.set_warm_sessions(AnalyseWarmSessions(ExpectedRanks(Spec(s)), AnalyseParallel(s)));
  p.set_timeout_s(timeout_s);
  p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
  d.Schedule(p);
}

// A flush wait's answer as TorchProfileFlushWaited records it. The record
// keeps the answer's own keys: the four counts only when the answer carried
// them (an older worker's did not).
json FlushAnswerRecord(const results::TorchProfileWaitFlushResult& flushed, const json& answer) {
  json record = json{{"signal", flushed.signal()},
                     {"flush_timed_out", flushed.flush_timed_out()},
                     {"waited_ms", flushed.waited_ms()},
                     {"polls", flushed.polls()},
                     {"dirs", answer.is_object() ? answer.value("dirs", json::array()) : json::array()}};
  for (const char* f : {"expected_ranks", "dirs_seen", "ranks_finalised", "root_exists"})
    if (answer.is_object() && answer.contains(f)) record[f] = answer[f];
  return record;
}

// The flush wait of one task as TorchProfileFlushWaited records it.
json FlushRecord(const TaskInfo& t) {
  if (t.status != TaskStatus::kSucceeded) {
    return json{{"signal", "wait_failed"},
                {"flush_timed_out", false},
                {"error_kind", t.result.value("error_kind", "")},
                {"error", t.result.value("error", "")}};
  }
  return FlushAnswerRecord(RecordedOf<results::TorchProfileWaitFlushResult>(t), TaskResultData(&t));
}

// A multi-node deployment's flush, once every node's wait ended: the whole
// deployment's record (every dir, the longest wait, timed out if any node
// did) with each node's own under `nodes`. nullopt while a wait is out.
std::optional<json> DeploymentFlush(const RunState& s) {
  json nodes = json::array(), dirs = json::array();
  bool timed_out = false, failed = false;
  int64_t waited = 0, polls = 0;
  for (int i = 0; i < NodeCount(s); ++i) {
    const TaskInfo* t = LastNodeTask(s, kTpWaitFlushTask, i);
    if (!t || Pending(t)) return std::nullopt;
    json r = FlushRecord(*t);
    r["node"] = i;
    r["machine"] = NodeMachine(s, i);
    timed_out = timed_out || r.value("flush_timed_out", false);
    failed = failed || r.value("signal", "") == "wait_failed";
    waited = std::max<int64_t>(waited, r.value("waited_ms", int64_t{0}));
    polls += r.value("polls", int64_t{0});
    for (const auto& dir : r.value("dirs", json::array())) dirs.push_back(dir);
    nodes.push_back(std::move(r));
  }
  const std::string head_signal = nodes[0].value("signal", "");
  return json{{"signal", failed ? "wait_failed" : timed_out ? "timeout" : head_signal},
              {"flush_timed_out", timed_out},
              {"waited_ms", waited},
              {"polls", polls},
              {"dirs", dirs},
              {"nodes", nodes}};
}

// Every node's ranks listed (each node once), unless the run is being
// cancelled or cleaned up: the listings' answers schedule the analyses.
void ListEveryNode(Decision& d) {
  const RunState& s = d.state();
  if (s.cancel_requested || DataOf<kind_data::TorchProfileData>(s).cleanup()) return;
  if (!Multi(s)) {
    if (LastTask(s, kTpListDirsTask) == nullptr)
      ScheduleProfileListing(d, ProfileRoot(s), Spec(s).analyse_timeout_s(), nullptr,
                             AnalyseWarmSessions(ExpectedRanks(Spec(s)), AnalyseParallel(s)));
    return;
  }
  for (int i = 0; i < NodeCount(s); ++i) {
    if (LastNodeTask(d.state(), kTpListDirsTask, i) != nullptr) continue;
    const auto svc = NodeServiceOf(d.state(), i);
    ScheduleProfileListing(d, NodeProfileRoot(d.state(), i), Spec(d.state()).analyse_timeout_s(),
                           svc ? &svc->record : nullptr, NodeWarmSessions(d.state()));
  }
}

// A multi-node run's clocks again at the end: once its profile window has
// closed, beside the stops, the listings and the analyses (each node's
// measure on a connection of its own: it holds no stop up). Measured after
// the stops before (runs 34-50), it then outlasted the analyses on the
// head and was the run's last task (docs/PERFORMANCE.md run 53). Once.
void ScheduleEndClock(Decision& d) {
  if (!Multi(d.state())) return;
  const TaskInfo* clock = LastTask(d.state(), kMachineClockTask);
  if (clock == nullptr || PayloadOf<tasks::MachineClock>(*clock).when() != "end") ScheduleClock(d, "end");
}

// The flush wait has ended (by a signal, its timeout or a failed task): the
// outcome is recorded and the service is stopped; the gates judge the outputs.
// A flush that ended by its signal says torch_npu finalised every rank (each
// has its profiler_info and its files stopped growing): nothing writes into
// the rank dirs any more, so they are listed, and analysed, while the
// service stops (the stop was on the run's critical path: docs/PERFORMANCE.md
// run 40). A flush that timed out or failed lists only once the service is
// down, as before (an unfinalised rank may still be written).
void AfterFlush(Decision& d, json record) {
  const std::string signal = record.value("signal", "");
  const bool final_dirs = !record.value("flush_timed_out", false) && signal != "wait_failed" && signal != "timeout";
  record["min_wait_s"] = Spec(d.state()).flush_seconds();
  d.Emit(kTpFlushWaited, std::move(record));
  d.Transition("stopping_service");
  ScheduleStop(d, false);
  if (final_dirs) ListEveryNode(d);
  ScheduleEndClock(d);
}

// A multi-node deployment's flush wait on one node ended: on with the run
// once every node's has.
void AfterNodeFlush(Decision& d) {
  if (d.state().state != "flush") return;
  if (auto record = DeploymentFlush(d.state())) AfterFlush(d, std::move(*record));
}

void FinishAnalysis(Decision& d);

// A multi-node deployment's node i confirmed stopped while another node's
// stop is still out: its ranks are listed (and then analysed) now rather
// than once every node has stopped (a node's listing needs nothing from the
// others). Not in a cleanup or a cancellation, nor before a confirmed stop.
void ListStoppedNode(Decision& d, int node) {
  const RunState& s = d.state();
  if (s.state != "stopping_service" || s.cancel_requested || DataOf<kind_data::TorchProfileData>(s).cleanup()) return;
  if (!NodeStopConfirmed(s, node) || LastNodeTask(s, kTpListDirsTask, node) != nullptr) return;
  const auto svc = NodeServiceOf(s, node);
  ScheduleProfileListing(d, NodeProfileRoot(s, node), Spec(s).analyse_timeout_s(), svc ? &svc->record : nullptr,
                         NodeWarmSessions(s));
}

// The service is down (or could not be stopped): analyse, or end the cleanup.
void AfterStop(Decision& d) {
  const RunState& s = d.state();
  if (s.cancel_requested || DataOf<kind_data::TorchProfileData>(s).cleanup()) AbandonPendingClock(d, "the run ends");
  if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
  if (DataOf<kind_data::TorchProfileData>(s).cleanup()) return d.Finish(RunStatus::kFailed, RunError(s));
  d.Transition("analysing");
  // The clocks at the end (the run ends once they answered): scheduled with
  // the stops (AfterFlush); a run recorded before that measures them here.
  ScheduleEndClock(d);
  // Every node's ranks are analysed where they were written, every node at
  // once, each within its own means (ScheduleRankAnalyses); a node listed
  // with the stop (AfterFlush) or once it stopped (ListStoppedNode) is not
  // listed again.
  ListEveryNode(d);
  if (AnalysisDone(d.state())) FinishAnalysis(d);  // a multi-node run waits for its end clock measure (AfterClock)
}

void FinishAnalysis(Decision& d) {
  // A multi-node run's end clock measure (scheduled with the flush) answers
  // first: a run ends after every task it scheduled (AfterClock goes on).
  if (ClockPending(d.state())) return;
  const json a = AnalysisProjection(d.state(), ExpectedRanks(Spec(d.state())));
  json gated = {{"analysis_status", a["analysis_status"]},
                {"rank_count", a["rank_count"]},
                {"expected_ranks", ExpectedRanks(Spec(d.state()))},
                {"remote_profile_root", a["remote_profile_root"]}};
  if (a.contains("analysis_detail")) gated["detail"] = a["analysis_detail"];
  d.Emit(kTpAnalysisGated, gated);
  const std::string error = RunError(d.state());
  if (error.empty()) return d.Finish(RunStatus::kOk);
  d.Finish(RunStatus::kFailed, error);
}

// The deployment is ready: the profile window opens, once a multi-node
// run's start clock measure has answered. Nothing of the run is decided
// while the workload runs then: a decision there is a place the server can
// crash, and a recovered wave is sent again into the open window (more
// requests in the capture than the workload asked for; the crash matrix's
// two-node shards caught it when the measure answered mid-wave under load).
void OpenProfileWindow(Decision& d) {
  if (Multi(d.state()) && ClockPending(d.state())) return;  // AfterClock opens it
  d.Transition("profiling");
  ScheduleControl(d, "start_profile");
}

// A clock measure answered (measured or not): a deployment ready while it
// was out opens its profile window now; an analysis that finished while it
// was out is judged now.
void AfterClock(Decision& d) {
  const RunState& s = d.state();
  if (s.terminal) return;
  if (s.state == "ready") {
    if (!s.cancel_requested && !DataOf<kind_data::TorchProfileData>(s).cleanup()) OpenProfileWindow(d);
    return;
  }
  if (s.state == "analysing" && AnalysisDone(s)) FinishAnalysis(d);
}

// A multi-node deployment's launch answered on some node: readiness once
// all are up (every node was launched at once; a run launched head-first
// launches the others once the head answered).
void AfterNodeLaunched(Decision& d, const TaskInfo& task, const TaskResult& result) {
  const RunState& s = d.state();
  if (s.cancel_requested || DataOf<kind_data::TorchProfileData>(s).cleanup()) return ContinueCleanup(d);
  if (NodeOfTask(s, task) == 0) {
    const auto& launched = result.Required<results::ServiceLaunchResult>();
    const run_specs::TorchProfileSpec spec = Spec(s);
    const std::string run_id = s.run_id;
    LaunchHeadlessNodes(d, launched, [&](int node, std::optional<int32_t> port) {
      return TorchProfileLaunchPayload(run_id, spec, node, port);
    });
  }
  if (!AllNodesLaunched(d.state())) return;
  // The clocks at the start, while the head's readiness is awaited (a
  // measure beside the launches held the head's connection and slowed its
  // launch); a run recorded when the measure went with the launches has it.
  if (LastTask(d.state(), kMachineClockTask) == nullptr) ScheduleClock(d, "start");
  const TaskInfo* head = LastNodeTask(d.state(), kServiceLaunchTask, 0);
  d.Schedule(BuildWaitReadyPayload(PayloadOf<tasks::ServiceLaunch>(*head),
                                   RecordedOf<results::ServiceLaunchResult>(*head), d.now_ms()));
  WatchNodes(d, 1, kNodeWatchPollS);
}

}  // namespace

const TransitionTable& TorchProfileMachine::transitions() const {
  static const TransitionTable table(
      {{"queued", "preparing_image"},        {"queued", "launching"},
       {"preparing_image", "launching"},     {"launching", "ready"},
       // the capture check before the launch (capture flags or budget_check)
       {"queued", "capture_check"},          {"preparing_image", "capture_check"},
       {"capture_check", "launching"},       {"capture_check", "failed"},
       {"capture_check", "cancelled"},
       {"ready", "profiling"},               {"profiling", "workload"},
       {"workload", "stopping_profile"},     {"stopping_profile", "flush"},
       {"flush", "stopping_service"},        {"stopping_service", "analysing"},
       {"analysing", "completed"},           {"analysing", "failed"},
       // cleanup after a failure or a cancel
       {"launching", "stopping_service"},    {"ready", "stopping_service"},
       {"profiling", "stopping_service"},    {"workload", "stopping_service"},
       {"stopping_profile", "stopping_service"},
       {"stopping_service", "failed"},       {"stopping_service", "cancelled"},
       // nothing running yet
       {"queued", "failed"},                 {"preparing_image", "failed"},
       {"launching", "failed"},              {"queued", "cancelled"},
       {"preparing_image", "cancelled"},     {"launching", "cancelled"},
       {"analysing", "cancelled"}},
      {"completed", "failed", "cancelled"});
  return table;
}

Status TorchProfileMachine::ValidateSpec(json& spec) const { return ValidateTorchProfileSpec(spec); }

std::optional<DeviceNeed> TorchProfileMachine::DevicesNeeded(const RunState& s) const {
  return ServiceDeviceNeed(s, Spec(s));
}

std::optional<tasks::ServiceLaunch> TorchProfileMachine::SpecService(const RunState& s) const {
  return TorchProfileLaunchPayload(s.run_id, Spec(s));
}

void TorchProfileMachine::OnStart(Decision& d) const {
  const run_specs::TorchProfileSpec& spec = Spec(d.state());
  if (spec.request_kind() == "vl") {
    tasks::TorchProfilePrepareImage p;
    p.set_image_path(spec.image_path());
    p.set_image_height(spec.image_height());
    d.Transition("preparing_image");
    d.Schedule(p);
    return;
  }
  StartLaunch(d);
}

void TorchProfileMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  if (OnClockTaskSucceeded(d, task, result)) return AfterClock(d);
  const RunState& s = d.state();
  const std::string role = RoleOf(task);
  if (task.kind == kTpPrepareImageTask) {
    if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
    return StartLaunch(d);
  }
  if (task.kind == kTpCaptureCheckTask) {
    if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
    const CaptureVerdict v = JudgeCapture(Spec(s), result.As<results::TorchProfileCaptureCheckResult>());
    d.Emit(kTpCaptureChecked, v.record);
    if (!v.error_kind.empty()) {
      StepFailed(d, "capture_check", v.error_kind, v.error);
      return d.Finish(RunStatus::kFailed, RunError(d.state()));
    }
    return StartLaunch(d);
  }
  if (task.kind == kServiceLaunchTask) {
    if (Multi(s)) return AfterNodeLaunched(d, task, result);
    if (s.cancel_requested) return BeginCleanup(d, "cancelled");
    d.Schedule(BuildWaitReadyPayload(PayloadOf<tasks::ServiceLaunch>(task),
                                     result.Required<results::ServiceLaunchResult>(), d.now_ms()));
    return;
  }
  if (task.kind == kServiceWatchTask) return;  // a headless node's watch ended without a death (abandoned)
  if (task.kind == kServiceWaitReadyTask) {
    d.Transition("ready");
    return OpenProfileWindow(d);
  }
  if (task.kind == kTpControlTask && role == "start_profile") {
    const auto& control = result.As<results::TorchProfileControlResult>();
    if (!control.ok()) {
      StepFailed(d, "start_profile", "http_status", ControlRefusal("/start_profile", control));
      return BeginCleanup(d, "start_profile failed");
    }
    d.Transition("workload");
    return ScheduleRequests(d, "wave");
  }
  if (task.kind == kTpRequestsTask && role == "wave") return ScheduleRequests(d, "followup");
  if (task.kind == kTpRequestsTask && role == "followup") {
    results::TorchProfileRequestsResult wave;
    if (const TaskInfo* t = LastTask(s, kTpRequestsTask, "wave"); t && t->status == TaskStatus::kSucceeded)
      wave = RecordedOf<results::TorchProfileRequestsResult>(*t);
    d.Emit(kTpWorkloadGated,
           json{{"workload_status", WorkloadGate(wave, result.As<results::TorchProfileRequestsResult>(),
                                                 Spec(s).benchmark_success_threshold())}});
    d.Transition("stopping_profile");
    return ScheduleControl(d, "stop_profile");
  }
  if (task.kind == kTpControlTask && role == "stop_profile") {
    const auto& control = result.As<results::TorchProfileControlResult>();
    if (!control.ok()) {
      StepFailed(d, "stop_profile", "http_status", ControlRefusal("/stop_profile", control));
      return BeginCleanup(d, "stop_profile failed");
    }
    d.Transition("flush");
    const int64_t min_s = Spec(s).flush_seconds();
    if (min_s > 0) {
      d.ScheduleTimer("flush", min_s * 1000);
      return;
    }
    return ScheduleFlushWait(d);
  }
  if (task.kind == kTpWaitFlushTask) {
    if (s.state != "flush") return;
    if (Multi(s)) return AfterNodeFlush(d);
    return AfterFlush(d, FlushAnswerRecord(result.As<results::TorchProfileWaitFlushResult>(), result.recorded()));
  }
  if (task.kind == kServiceStopTask && Multi(s)) {
    const auto& stop = result.As<results::ServiceStopResult>();
    const int node = NodeOfTask(s, task);
    if (!stop.stopped() && !stop.already_gone() && !stop.never_started() &&
        PayloadOf<tasks::ServiceStop>(task).force())
      StepFailed(d, "stop_service", "not_stopped",
                 fmt::format("node {} ({}): the service survived SIGINT, SIGTERM and SIGKILL", node,
                             NodeMachine(s, node)));
    if (DataOf<kind_data::TorchProfileData>(d.state()).cleanup()) return ContinueCleanup(d);
    if (ContinueStops(d, false)) return ListStoppedNode(d, node);
    return AfterStop(d);
  }
  if (task.kind == kServiceStopTask) {
    const auto& stop = result.As<results::ServiceStopResult>();
    if (stop.never_started())
      StepFailed(d, "stop_service", "never_launched", "the service was never launched (its runtime dir has no start marker)");
    if (!stop.stopped() && !stop.already_gone()) {
      if (!PayloadOf<tasks::ServiceStop>(task).force()) return ScheduleStop(d, true);
      StepFailed(d, "stop_service", "not_stopped", "the service survived SIGINT, SIGTERM and SIGKILL");
    }
    return AfterStop(d);
  }
  // (A node listed before every node stopped is judged in "analysing" only.)
  if (task.kind == kTpListDirsTask) {
    if (!ScheduleRankAnalyses(d, task, result.As<results::TorchProfileListProfileDirsResult>(),
                              Spec(s).analyse_timeout_s(), AnalyseParallel(s)) &&
        d.state().state == "analysing" && AnalysisDone(d.state()))
      FinishAnalysis(d);
    return;
  }
  if (task.kind == kTpAnalyseRankTask) {
    ContinueRankAnalyses(d, Spec(s).analyse_timeout_s());  // the next rank takes the freed place
    if (d.state().state == "analysing" && AnalysisDone(d.state())) FinishAnalysis(d);
  }
}

void TorchProfileMachine::OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  if (IsClockTask(task)) return AfterClock(d);  // no offsets then; the run goes on
  const RunState& s = d.state();
  const std::string text = failure.Text();
  if (task.kind == kTpPrepareImageTask || task.kind == kTpCaptureCheckTask) {
    if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
    StepFailed(d, task.kind == kTpPrepareImageTask ? "prepare_image" : "capture_check", failure.error_kind(),
               failure.error() + (task.kind == kTpCaptureCheckTask ? " — nothing was launched" : ""));
    return d.Finish(RunStatus::kFailed, RunError(d.state()));
  }
  if (task.kind == kServiceStopTask && Multi(s)) {
    const int node = NodeOfTask(s, task);
    if (PayloadOf<tasks::ServiceStop>(task).force())
      StepFailed(d, "stop_service", failure.error_kind(),
                 fmt::format("node {} ({}): {}", node, NodeMachine(s, node), failure.error()));
    if (DataOf<kind_data::TorchProfileData>(d.state()).cleanup()) return ContinueCleanup(d);
    if (ContinueStops(d, false)) return;  // an unforced stop that failed is tried again with force
    return AfterStop(d);
  }
  if (task.kind == kServiceStopTask) {
    if (!PayloadOf<tasks::ServiceStop>(task).force()) return ScheduleStop(d, true);
    StepFailed(d, "stop_service", failure.error_kind(), failure.error());
    return AfterStop(d);
  }
  if (task.kind == kServiceWatchTask) {
    // A headless node's service died while the run used it: the deployment is broken.
    const std::set<std::string> using_it = {"launching", "ready", "profiling", "workload", "stopping_profile", "flush"};
    if (!using_it.count(s.state) || DataOf<kind_data::TorchProfileData>(s).cleanup()) return;
    const int node = NodeOfTask(s, task);
    StepFailed(d, "node_lost", failure.error_kind(),
               fmt::format("node {} ({}): {}", node, NodeMachine(s, node), failure.error()));
    d.AbandonOutstanding(fmt::format("node {} ({}) was lost", node, NodeMachine(s, node)));
    return BeginCleanup(d, fmt::format("node {} ({}) was lost", node, NodeMachine(s, node)));
  }
  if (task.kind == kTpWaitFlushTask && Multi(s)) return AfterNodeFlush(d);
  if (task.kind == kTpWaitFlushTask) {
    if (s.state != "flush") return;
    return AfterFlush(d, json{{"signal", "wait_failed"},
                              {"flush_timed_out", false},
                              {"error_kind", failure.error_kind()},
                              {"error", failure.error()}});
  }
  if (task.kind == kTpAnalyseRankTask || task.kind == kTpListDirsTask) {
    StepFailed(d, task.kind == kTpListDirsTask ? "list_profile_dirs" : "analyse", failure.error_kind(),
               failure.error());
    ContinueRankAnalyses(d, Spec(s).analyse_timeout_s());
    if (d.state().state == "analysing" && AnalysisDone(d.state())) FinishAnalysis(d);
    return;
  }
  std::string step = task.kind;
  std::string error = failure.error();
  if (task.kind == kServiceLaunchTask) {
    step = "service_launch";
    if (LaunchStartedNothing(task)) error += " — the service was never launched (nothing to stop)";
    if (Multi(s)) {
      const int node = NodeOfTask(s, task);
      error = fmt::format("node {} ({}): {}", node, NodeMachine(s, node), error);
      if (DataOf<kind_data::TorchProfileData>(s).cleanup()) {
        StepFailed(d, step, failure.error_kind(), error);
        return ContinueCleanup(d);
      }
    }
  }
  if (task.kind == kServiceWaitReadyTask) step = "service_ready";
  if (task.kind == kTpControlTask || task.kind == kTpRequestsTask) {
    const std::string role = RoleOf(task);
    step = role.empty() ? task.kind : role;
  }
  if (!s.cancel_requested) StepFailed(d, step, failure.error_kind(), error);
  BeginCleanup(d, s.cancel_requested ? "cancelled" : step + " failed: " + text);
}

void TorchProfileMachine::OnTimer(Decision& d, const TimerInfo& timer) const {
  if (timer.purpose != "flush" || d.state().state != "flush") return;
  ScheduleFlushWait(d);  // the minimum has passed: now wait for the signal
}

void TorchProfileMachine::OnCancel(Decision& d) const {
  std::vector<std::string> abandon, timers;
  for (const auto& [id, t] : d.state().tasks)
    if ((t.in_flight() || t.status == TaskStatus::kRetryWait) && t.kind != kServiceLaunchTask &&
        t.kind != kServiceStopTask)
      abandon.push_back(id);
  for (const auto& [id, t] : d.state().timers)
    if (t.armed) timers.push_back(id);
  for (const auto& id : abandon) d.Emit(ev::kTaskAbandoned, json{{"task_id", id}, {"reason", "run cancelled"}});
  for (const auto& id : timers) d.CancelTimer(id);
  const RunState& s = d.state();
  if (Multi(s)) return BeginCleanup(d, "cancelled");  // waits for the launches still out itself
  if (Pending(LastTask(s, kServiceLaunchTask))) {
    d.Emit(kTpCleanupStarted, json{{"reason", "cancelled; waiting for the launch to report its pid"}});
    return;
  }
  BeginCleanup(d, "cancelled");
}

void TorchProfileMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& p) const {
  if (ApplyClockEvent(s, type, p)) return;
  if (type == kTpStepFailed) {
    if (!s.data.contains("errors")) s.data["errors"] = json::array();
    s.data["errors"].push_back(p);
  } else if (type == kTpWorkloadGated) {
    s.data["workload_status"] = p.value("workload_status", json::object());
  } else if (type == kTpAnalysisGated) {
    s.data["analysis_status"] = p.value("analysis_status", json(nullptr));
    if (p.contains("detail")) s.data["analysis_detail"] = p["detail"];
  } else if (type == kTpAnalyseLimitChosen) {
    ApplyAnalyseLimit(s, p);
  } else if (type == kTpFlushWaited) {
    s.data["flush"] = p;
  } else if (type == kTpCaptureChecked) {
    s.data["capture_check"] = p;
  } else if (type == kTpCleanupStarted) {
    s.data["cleanup"] = true;
    s.data["cleanup_reason"] = p.value("reason", "");
  }
}

json TorchProfileMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  const std::optional<KnownService> svc = ServiceOf(s);
  j["service"] = svc ? json{{"runtime_dir", svc->runtime_dir},
                            {"pid", svc->pid ? json(*svc->pid) : json(nullptr)},
                            {"port", svc->port ? json(*svc->port) : json(nullptr)},
                            {"stopped", ServiceStopped(s)}}
                     : json(nullptr);
  j["workload_status"] = s.data.value("workload_status", json(nullptr));
  j["analysis_status"] = s.data.value("analysis_status", json(nullptr));
  j["flush"] = s.data.value("flush", json(nullptr));
  j["step_errors"] = s.data.value("errors", json::array());
  j["analyse_limits"] = s.data.value("analyse_limits", json::array());
  if (s.data.contains("capture_check")) {
    j["capture_check"] = s.data["capture_check"];
    const std::string note = CaptureBudgetNote(s);
    if (!note.empty()) j["capture_note"] = note;
  }
  if (Multi(s)) {
    j["nodes"] = NodesSummary(s);
    j["clock"] = ClockProjection(s);
  }
  return j;
}

std::string CaptureBudgetNote(const RunState& s) {
  const json check = s.data.value("capture_check", json(nullptr));
  if (!check.is_object() || !check.value("ok", false) || !check.contains("raw_bytes")) return "";
  const TaskInfo* listing = LastTask(s, kTpListDirsTask);
  if (listing == nullptr || listing->status != TaskStatus::kSucceeded) return "";
  const auto listed = RecordedOf<results::TorchProfileListProfileDirsResult>(*listing);
  int64_t measured = 0;
  for (int64_t b : listed.means().dir_bytes())
    if (b > 0) measured += b;
  return CaptureOutgrewEstimate(check.value("raw_bytes", int64_t{0}), measured);
}

json TorchProfileMachine::Manifest(const RunState& s) const { return TorchProfileManifest(s); }

void RegisterTorchProfileKinds(KindRegistry& r) {
  r.Register(std::make_unique<TorchProfileMachine>());
  r.Register(std::make_unique<AnalyseRootMachine>());
}

}  // namespace npuprof::sm
