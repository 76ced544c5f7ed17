#include "statemachine/memory_profile_machine.h"

#include <algorithm>
#include <optional>
#include <vector>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "common/json_field.h"

#include "statemachine/clock_offsets.h"
#include "statemachine/deployment_service.h"
#include "statemachine/deployment_spec.h"
#include "statemachine/event_types.h"
#include "statemachine/inference_window.h"
#include "statemachine/json_message_table.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/memory_advice.h"
#include "statemachine/memory_evidence.h"
#include "statemachine/memory_manifest.h"
#include "statemachine/memory_profile_events.h"
#include "statemachine/memory_profile_nodes.h"
#include "statemachine/memory_profile_progress.h"
#include "statemachine/memory_profile_spec.h"
#include "statemachine/memory_profile_steps.h"
#include "statemachine/memory_report.h"
#include "statemachine/operator_memory_steps.h"
#include "statemachine/torch_profile_tasks.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/service_spec.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_result.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"
#include "kind_data.pb.h"
#include "run_specs.pb.h"
#include "task_payloads.pb.h"

namespace npuprof::sm {

namespace {

// The run's validated spec (read at the point of use: a lease grant may
// replace the decoded message). ValidateMemorySpec fills the standalone
// fields (stop_grace_s, model, tp, ...) only in standalone mode: they are
// read from it only in standalone steps. What may be either the service's or
// the spec's (model, tp, dp of the weights step) is the service's first.
const run_specs::MemoryProfileSpec& Spec(const RunState& s) { return SpecOf<run_specs::MemoryProfileSpec>(s); }

const std::string& Mode(const RunState& s) { return Spec(s).mode(); }
bool Standalone(const RunState& s) { return Mode(s) == "standalone"; }

bool Multi(const RunState& s) { return NodeCount(s) > 1; }

// The service of node i of a standalone run (node 0 of a one-node run is its
// one service), given the head's data-parallel RPC port for another node.
tasks::ServiceLaunch NodeService(const RunState& s, int node, std::optional<int32_t> rpc_port) {
  tasks::ServiceLaunch p = BuildNodeLaunchPayload(s.run_id, 1, Spec(s), node, rpc_port, MemoryServeArgs(Spec(s)));
  p.set_served_model_name(MemoryServedName(Spec(s), s.run_id));
  return p;
}

// The service a standalone run's spec asks for (SpecService): the head's,
// told the deployment's RPC port in a multi-node run.
tasks::ServiceLaunch StandaloneService(const RunState& s) {
  if (Multi(s)) return NodeService(s, 0, DeploymentRpcPort(Spec(s), s.run_id));
  return NodeService(s, 0, std::nullopt);
}

using Data = kind_data::MemoryProfileData;
// The service record as a decision reads it: ServiceLaunched's keys plus the
// status (the serve kind's record message, which the attached run's summary
// carries too).
using ServiceRecord = kind_data::ServeData::Service;

std::string StepOf(const TaskInfo& t);

// Whether the task runs a step marked early (memory_profile_steps.h): it runs
// beside the step before it and holds the walk only where its own step comes.
bool EarlyTask(const RunState& s, const TaskInfo& t) {
  const std::string step = StepOf(t);
  for (const MemStep& st : MemoryStepsOf(Mode(s)))
    if (st.name == step) return st.early;
  return false;
}

// The vLLM log says the KV cache would be negative (or zero): vLLM refused to start.
bool KvRefused(const RunState& s) {
  const auto kv = NumField(Field(Field(s.data, "vllm_log"), "summary"), "kv_cache_available_gib");
  return kv && *kv <= 0;
}

// A task of `step` was scheduled (whatever became of it).
bool StepTaskSent(const RunState& s, std::string_view step) {
  for (const auto& [id, t] : s.tasks)
    if (StepOf(t) == step) return true;
  return false;
}

bool Unanswered(const TaskInfo& t) { return t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait; }

// An early step's task has not answered yet.
bool EarlyPending(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (Unanswered(t) && EarlyTask(s, t)) return true;
  return false;
}

// A task of `step` is in flight (pending or waiting to retry).
bool StepInFlight(const RunState& s, std::string_view step) {
  for (const auto& [id, t] : s.tasks)
    if (Unanswered(t) && StepOf(t) == step) return true;
  return false;
}

// The start's clock measure has not answered: the collection cuts each
// node's series by it (the end's, beside the stops, holds only the run's end).
bool StartClockPending(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (IsClockTask(t) && Unanswered(t) && PayloadOf<tasks::MachineClock>(t).when() != "end") return true;
  return false;
}

// A step is in flight (task pending or retrying) or the flush minimum timer is armed.
bool Busy(const RunState& s) {
  // A headless node's watch answers only when its service dies: it never
  // holds the walk. A deployment's clock measure holds only the collection
  // and the end (Advance); an early step's task only its own step and the end.
  for (const auto& [id, t] : s.tasks)
    if (Unanswered(t) && t.kind != kServiceWatchTask && !IsClockTask(t) && !EarlyTask(s, t)) return true;
  for (const auto& [id, t] : s.timers)
    if (t.armed && t.purpose == "flush") return true;
  return false;
}

// The service this run profiles, as the document the summary and manifest
// show: its own (standalone) or the attached one.
json ServiceOf(const RunState& s, const Data& data) {
  if (Standalone(s)) {
    // The launch record says "starting"; where the service got since is
    // read from the run's own steps (ready, then the stop's result).
    json svc = s.data.value("service", json::object());
    if (!svc.is_object() || svc.empty()) return svc;
    if (data.stopped().never_started())
      svc["status"] = "never_started";
    else if (data.has_stopped())  // an answer that does not say reads as stopped
      svc["status"] = !data.stopped().has_stopped() || data.stopped().stopped() || data.stopped().already_gone()
                          ? "stopped"
                          : "failed";
    else if (data.has_ready())
      svc["status"] = "ready";
    return svc;
  }
  json svc = Field(Field(s.spec, "attach_run_record"), "service");
  if (!svc.is_object()) svc = json::object();
  // The final record of the serve run (sent with its end) wins.
  const json& fin = Field(Field(Field(s.data, "serve_ended"), "summary"), "service");
  if (fin.is_object())
    for (const auto& [k, v] : fin.items()) svc[k] = v;
  return svc;
}

// ServiceOf read as its message. Keys it does not declare are passed over; a
// value of the wrong type (an attached record edited elsewhere) throws,
// naming the key.
ServiceRecord RecordOf(const json& svc) {
  ServiceRecord out;
  if (!svc.is_object() || svc.empty()) return out;
  if (auto why = JsonMessageTable::Parse(svc.dump(-1, ' ', false, json::error_handler_t::replace), out,
                                         /*tolerate_unknown_keys=*/true))
    throw std::logic_error("the service record of this memory-profile run cannot be read: " + *why);
  return out;
}

// A path the record holds (a JSON string), else the fallback.
std::string PathOr(const google::protobuf::Value& v, const std::string& fallback) {
  return v.has_string_value() ? v.string_value() : fallback;
}

// What a decision reads: the run, its data and its service, decoded together.
struct View {
  const RunState& s;
  Data data;
  json service;           // ServiceOf
  ServiceRecord svc;      // the same, as its message

  explicit View(const RunState& run)
      : s(run), data(DataOf<Data>(run)), service(ServiceOf(run, data)), svc(RecordOf(service)) {}

  bool Failed(std::string_view step) const { return MemStepFailed(data, step); }
  // A deployment's per-node step is done once every node's is.
  bool Done(std::string_view step) const {
    if (!MemStepDone(data, step)) return false;
    if (!Multi(s) || !MemPerNodeStep(step)) return true;
    for (int i = 1; i < NodeCount(s); ++i)
      if (!MemNodeStepDone(s, i, step)) return false;
    return true;
  }
  bool ServeEnded() const { return data.has_serve_ended(); }
  bool Wrapped() const { return Standalone(s) || !PathOr(svc.wrap_script(), "").empty(); }
  std::string MsprofDir() const { return svc.runtime_dir() + "/msprof_data"; }
  // The service's runtime dir: the record's, else the one the launch was given.
  std::string RuntimeDir() const {
    return !svc.runtime_dir().empty() ? svc.runtime_dir() : data.launch_attempted().runtime_dir();
  }
  // The attached or launched service's log: the record's path, else the
  // launch's conventional one under rt.
  std::string LogOf(const google::protobuf::Value& path, const std::string& rt, const char* file) const {
    return PathOr(path, rt + "/" + file);
  }
  std::string ServedName() const { return svc.served_model_name().empty() ? svc.model() : svc.served_model_name(); }
  std::optional<int64_t> Pid() const { return svc.has_pid() ? std::optional<int64_t>(svc.pid()) : std::nullopt; }
  bool Skipped(MemSkip why) const {
    switch (why) {
      case MemSkip::kNever: return false;
      case MemSkip::kNotLive: return ServeEnded() || Failed("ready");
      case MemSkip::kServeEnded: return ServeEnded();
      case MemSkip::kNotWrapped: return !Wrapped();
      case MemSkip::kNoOperatorMemory: return !Standalone(s) || !Spec(s).operator_memory();
    }
    return false;
  }
  bool ExpertParallel() const {
    if (Standalone(s)) return Spec(s).enable_expert_parallel();
    for (const auto& a : svc.extra_args().values())
      if (a.string_value() == "--enable-expert-parallel") return true;
    return false;
  }
};

// View(s); nullopt, with why, when the run's data or its service record
// cannot be read (a store written with another schema).
std::optional<View> TryView(const RunState& s, std::string* why) {
  try {
    return std::optional<View>(std::in_place, s);
  } catch (const std::logic_error& e) {
    *why = e.what();
    return std::nullopt;
  }
}

// The step a memory-profile task was scheduled for (each payload carries
// it); "" for a task kind that is not one of this run kind's.
std::string StepOf(const TaskInfo& t) {
  if (t.kind == kMemPreflightTask) return PayloadOf<tasks::MemoryPreflight>(t).step();
  if (t.kind == kMemNpuSmiTask) return PayloadOf<tasks::MemoryNpuSmi>(t).step();
  if (t.kind == kServiceLaunchTask) return PayloadOf<tasks::ServiceLaunch>(t).step();
  if (t.kind == kServiceWaitReadyTask) return PayloadOf<tasks::ServiceWaitReady>(t).step();
  if (t.kind == kMemLogsTask) return PayloadOf<tasks::MemoryLogs>(t).step();
  if (t.kind == kMemInferTask) return PayloadOf<tasks::MemoryInfer>(t).step();
  if (t.kind == kServiceStopTask) return PayloadOf<tasks::ServiceStop>(t).step();
  if (t.kind == kMemWeightsTask) return PayloadOf<tasks::MemoryWeights>(t).step();
  if (t.kind == kMemWaitFlushTask) return PayloadOf<tasks::MemoryWaitFlush>(t).step();
  if (t.kind == kMemExportTask) return PayloadOf<tasks::MemoryExport>(t).step();
  if (t.kind == kMemCollectTask) return PayloadOf<tasks::MemoryCollectCsvs>(t).step();
  if (t.kind == kMemOperatorMemoryTask) return PayloadOf<tasks::MemoryOperatorMemory>(t).step();
  if (t.kind == kTpControlTask) return PayloadOf<tasks::TorchProfileControl>(t).role();  // profile_start | profile_stop
  return "";
}

std::string BlobOf(const TaskInfo& task, const std::string& name) {
  const json& b = Field(task.result, "blobs");
  return b.is_object() ? b.value(name, "") : "";
}

// One piece of evidence, as its domain event (memory_profile_events.h).
void Record(Decision& d, const std::string& field, json value) {
  const std::string_view type = MemoryEventTypeFor(field);
  if (!type.empty() && value.is_object()) return d.Emit(std::string(type), std::move(value));
  d.Emit(kMemRecorded, json{{"field", field}, {"value", std::move(value)}});
}

// Node i's evidence: the head's as a one-node run's, another node's under
// data.node_evidence (memory_profile_nodes.h).
void RecordOn(Decision& d, int node, const std::string& field, json value) {
  if (node == 0) return Record(d, field, std::move(value));
  d.Emit(kMemNodeEvidence, json{{"node", node},
                                {"machine", NodeMachine(d.state(), node)},
                                {"field", field},
                                {"value", std::move(value)}});
}

// A blob's sha256 by its name in a task's blobs ("" when absent).
std::string BlobIn(const json& blobs, const std::string& name) {
  return blobs.is_object() ? blobs.value(name, "") : "";
}

// An npu-smi snapshot's answer (memory.npu_smi's, or the readiness wait's
// after_ready) as node i's record of `step`.
void RecordSnapshot(Decision& d, int node, const std::string& step, const json& answer, const json& blobs) {
  const std::string file = step + "_npu_smi.txt";
  RecordOn(d, node, step, json{{"hbm", answer.value("hbm", json::object())}, {"source", "npu_smi"},
                               {"blob", BlobIn(blobs, file)}, {"file", file}});
}

// The log read's answer (memory.logs', or the readiness wait's vllm_log) as
// node i's vllm_log record.
void RecordLogs(Decision& d, int node, const json& answer, const json& blobs) {
  RecordOn(d, node, "vllm_log",
           json{{"summary", answer.value("summary", json::object())}, {"bytes", answer.value("bytes", 0)},
                {"blob", BlobIn(blobs, "vllm_serve.log")}, {"file", "vllm_serve.log"}});
}

void StepFailed(Decision& d, const std::string& step, const TaskFailure& failure) {
  d.Emit(kMemStepFailed, json{{"step", step}, {"error_kind", failure.error_kind()}, {"error", failure.error()}});
}

void Failing(Decision& d, const std::string& error) {
  if (!d.state().data.contains("failure")) d.Emit(kMemRunFailing, json{{"error", error}});
}

void MoveTo(Decision& d, const std::string& state) {
  if (d.state().state != state) d.Transition(state);
}


json MachineOf(const RunState& s) { return s.spec.value("machine_record", json::object()); }

// service.launch failed before anything was started (result.started=false):
// there are no logs to read and nothing to stop.
bool LaunchNeverHappened(const RunState& s) {
  const TaskInfo* launch = LastNodeTask(s, kServiceLaunchTask, 0);
  return launch != nullptr && LaunchStartedNothing(*launch);
}

// ---- scheduling of each step ---------------------------------------------

// The record of node i's service (its launch record; the head's is v.svc).
ServiceRecord NodeRecordOf(const View& v, int node) {
  if (node == 0) return v.svc;
  return RecordOf(MemNodeField(v.s, node, "service"));
}

// Node i's inventory record (the run's machine_record for the head of a
// one-node run), as the wrap script's path reads it.
json NodeMachineJson(const RunState& s, int node) {
  if (!Multi(s)) return MachineOf(s);
  return Field(Field(s.spec, "nodes")[node], "machine_record");
}

// The launch of node i >= 1 of a deployment, with the deployment's RPC port.
tasks::ServiceLaunch HeadlessLaunch(const RunState& s, int node, std::optional<int32_t> rpc_port) {
  tasks::ServiceLaunch p = NodeService(s, node, rpc_port);
  const std::string written = StrField(MemNodeField(s, node, "preflight"), "wrap_script", "");
  p.set_wrap_script(!written.empty() ? written : MemoryWrapScriptPath(NodeMachineJson(s, node), s.run_id));
  p.set_step("service");
  return p;
}

// The window node i's series is cut at (the activation peak), with what the
// node's evidence says of its clock. The head's own window for the head
// (the inference read the head's clock), else the window moved onto the
// node's clock by the measured offsets (inference_window.h); a node whose
// offset is not known is cut at the window as it is, and says so.
struct NodeWindow {
  std::optional<ChosenWindow> window;
  json clock;  // {"moved": bool, "note"}; null for a one-node run
};

NodeWindow NodeWindowOf(const RunState& s, int node) {
  NodeWindow out;
  out.window = ChooseInferenceWindow(Field(s.data, "inference"));
  if (!Multi(s) || !out.window) return out;
  if (node == 0 && out.window->clock == "target") return out;  // the head's own clock: the inference read it
  const auto offset = [&s](int i) -> std::optional<NodeClockOffset> {
    const auto m = MeasuredClockOf(s, NodeMachine(s, i));
    if (!m) return std::nullopt;
    return NodeClockOffset{m->offset_ms, m->uncertainty_ms};
  };
  if (auto moved = WindowOnNodeClock(*out.window, offset(0), offset(node))) {
    out.window = moved;
    out.clock = {{"moved", true},
                 {"note", out.window->clock == "target"
                              ? "the head's window moved onto this node's clock by the measured offsets "
                                "(this node's minus the head's), the margin widened by their uncertainties"
                              : "the server's window moved onto this node's clock by its measured offset, "
                                "the margin widened by its uncertainty"}};
  } else {
    out.clock = {{"moved", false},
                 {"note", "the clock offset of this node (or the head) was not measured: the series is cut at "
                          "the head's window as it is (the hosts' clocks are assumed close)"}};
  }
  return out;
}

// How often a deployment's headless nodes are checked alive while the run
// uses them (a death fails the run, naming the node).
constexpr int64_t kNodeWatchPollS = 2;

// A deployment's stop waits, after the inference answered, for a one-off
// liveness check of every headless node (CheckNodesAlive: one round trip
// each, all at once): a node lost during the inference is then named by its
// check, rather than found already gone by the stop (which is no proof: a node
// also exits when its head is stopped at the same time). Runs recorded before
// the check waited on this timer instead (one watch poll and a second); a
// resumed one still holds its stop until the timer fires.
constexpr const char* kNodeCheckTimer = "node_check";

bool NodeCheckArmed(const RunState& s) {
  for (const auto& [id, t] : s.timers)
    if (t.armed && t.purpose == kNodeCheckTimer) return true;
  return false;
}

void CancelNodeCheck(Decision& d) {
  for (const auto& [id, t] : d.state().timers)
    if (t.armed && t.purpose == kNodeCheckTimer) d.CancelTimer(id);
}

void Advance(Decision& d);

// Node i's service was found dead while the run used it (its watch or its
// check): the run fails naming the node, unless it is stopping anyway.
void NodeLost(Decision& d, int node, const std::string& why) {
  const RunState& s = d.state();
  if (DataOf<Data>(s).has_stopped() || s.cancel_requested || s.state == "stopped") return;
  const std::string where = fmt::format("node {} ({})", node, NodeMachine(s, node));
  Failing(d, fmt::format("{}: its service died: {}", where, why));
  d.AbandonOutstanding(where + " was lost");
  CancelNodeCheck(d);
}

// Whether node i's service was launched under msprof's wrap script.
bool NodeWrapped(const RunState& s, int node) {
  const TaskInfo* launch = LastNodeTask(s, kServiceLaunchTask, node);
  return launch && !PayloadOf<tasks::ServiceLaunch>(*launch).wrap_script().empty();
}

// The stop of a deployment, one step of the shared node lifecycle; once
// every node is settled the deployment's stop is recorded (data.stopped,
// with each node's) and the walk goes on.
void ScheduleNodeStops(Decision& d) {
  EndNodeWatches(d);
  if (ContinueNodeStops(d, d.state().cancel_requested, Spec(d.state()).stop_grace_s())) return;
  const RunState& s = d.state();
  json nodes = json::array();
  bool all = true;
  for (int i = 0; i < NodeCount(s); ++i) {
    const bool confirmed = !NodeServiceOf(s, i) || NodeStopConfirmed(s, i);
    all = all && confirmed;
    nodes.push_back({{"node", i}, {"machine", NodeMachine(s, i)}, {"stopped", confirmed}});
  }
  const std::string may_run = NodesThatMayStillRun(s);
  json rec = {{"stopped", all}, {"nodes", nodes}};
  if (!may_run.empty()) rec["note"] = may_run;
  Record(d, "stopped", rec);
  if (!all) Failing(d, may_run);
  Advance(d);
}

// The collection's payload (memory.collect_csvs, or the flush wait's `collect`).
tasks::MemoryCollectCsvs CollectPayload(const RunState& s, const std::string& msprof_dir, int node) {
  tasks::MemoryCollectCsvs p;
  p.set_step("msprof");
  p.set_msprof_dir(msprof_dir);
  // The window the handler cuts each device's npu_mem series at (the
  // activation peak), on this node's clock; absent when the inference gave none.
  if (auto w = NodeWindowOf(s, node).window) *p.mutable_inference_window() = ChosenWindowToMessage(*w);
  return p;
}

// The flush wait's payload (memory.wait_flush, or a stop's then_flush) for
// node i's service, its deadline extra_ms later than a wait scheduled now.
tasks::MemoryWaitFlush FlushPayload(const Decision& d, const View& v, const ServiceRecord& svc, int node,
                                    int64_t extra_ms) {
  const RunState& s = v.s;
  const std::string msprof_dir = svc.runtime_dir() + "/msprof_data";
  // The wait ends on msprof's own completion signals, or at its deadline.
  const int64_t timeout_s = Spec(s).flush_timeout_s();
  tasks::MemoryWaitFlush p;
  p.set_step("flushed");
  p.set_msprof_dir(msprof_dir);
  p.set_runtime_dir(svc.runtime_dir());
  if (svc.has_pid()) p.set_pid(svc.pid());
  p.set_stdout_log(v.LogOf(svc.stdout_log(), svc.runtime_dir(), "stdout.log"));
  p.set_timeout_s(timeout_s);
  p.set_deadline_ms(d.now_ms() + timeout_s * 1000 + extra_ms);
  // One node: where msprof exported by itself, the same command looks for
  // that export and reads the CSVs (issue 38; the export and collection
  // steps are then done with the wait). A deployment cuts each node's
  // series on its clock, measured meanwhile: its steps stay apart.
  if (!Multi(s)) *p.mutable_collect() = CollectPayload(s, msprof_dir, node);
  return p;
}

// Whether a stop takes the flush wait with it (ServiceStop.then_flush, issue
// 38): a one-node standalone run on its way to a good end, whose stop is
// graceful and whose wait comes right after it (no flush minimum to wait
// out first). The wait then costs no task round trip after msprof's exit.
bool FlushWithStop(const View& v, bool force) {
  const RunState& s = v.s;
  return Standalone(s) && !Multi(s) && !force && !s.cancel_requested && !v.data.has_failure() &&
         Spec(s).flush_s() <= 0 && !v.Done("flushed");
}

// The log read's payload for node i's service (memory.logs, or the
// readiness wait's then_logs).
tasks::MemoryLogs LogsPayload(const View& v, const ServiceRecord& svc, const std::string& rt) {
  tasks::MemoryLogs p;
  p.set_step("vllm_log");
  p.set_runtime_dir(rt);
  p.set_stdout_log(v.LogOf(svc.stdout_log(), rt, "stdout.log"));
  p.set_stderr_log(v.LogOf(svc.stderr_log(), rt, "stderr.log"));
  return p;
}

// Whether the readiness wait takes the after-ready snapshot and the log read
// with it (ServiceWaitReady.then_snapshot / then_logs, issue 38): a one-node
// standalone run on its way to a good end, neither step done yet. The
// inference is then scheduled with the wait's answer: no task round trip
// between readiness and the inference.
bool ReadyTakesSnapshot(const View& v) {
  const RunState& s = v.s;
  return Standalone(s) && !Multi(s) && !s.cancel_requested && !v.data.has_failure() && !v.Done("after_ready") &&
         !v.Done("vllm_log");
}

// Whether the inference takes the after-inference snapshot with it
// (MemoryInfer.then_snapshot, issue 38): a one-node standalone run on its
// way to a good end whose next step after the inference is the snapshot (no
// operator-memory window to close between them).
bool InferTakesSnapshot(const View& v) {
  const RunState& s = v.s;
  return Standalone(s) && !Multi(s) && !s.cancel_requested && !v.data.has_failure() && !v.Done("after_infer") &&
         v.Skipped(MemSkip::kNoOperatorMemory);
}

// Schedules step on node i (the head's payloads are those of a one-node
// run; another node's go to its machine and read its own service record).
void ScheduleOn(Decision& d, const View& v, const std::string& step, int node) {
  const RunState& s = v.s;
  const ServiceRecord svc = NodeRecordOf(v, node);
  std::optional<tasks::Machine> machine;
  if (node > 0) machine = DeploymentNodes(Spec(s))[node].record;
  const auto send = [&](auto& p) {
    if (machine) *p.mutable_machine() = *machine;
    d.Schedule(p);
  };
  // The service's runtime dir: the record's, else the one the launch was given.
  const std::string rt = node == 0 ? v.RuntimeDir() : svc.runtime_dir();
  const std::string msprof_dir = svc.runtime_dir() + "/msprof_data";
  if (step == "preflight") {
    tasks::MemoryPreflight p;
    p.set_step(step);
    p.set_run_id(s.run_id);
    p.set_wrap_script(MemoryWrapScriptPath(NodeMachineJson(s, node), s.run_id));
    p.set_msprof_mem_freq(Spec(s).msprof_mem_freq());
    send(p);
  } else if (step == "baseline" || step == "after_ready" || step == "after_infer") {
    tasks::MemoryNpuSmi p;
    p.set_step(step);
    p.set_phase(step);
    send(p);
  } else if (step == "service") {
    tasks::ServiceLaunch p = StandaloneService(s);
    // The script the preflight wrote, else where it writes it.
    const std::string& written = v.data.preflight().wrap_script();
    p.set_wrap_script(!written.empty() ? written : MemoryWrapScriptPath(MachineOf(s), s.run_id));
    p.set_step(step);
    Record(d, "launch_attempted", json{{"runtime_dir", p.runtime_dir()}});
    d.Schedule(p);
  } else if (step == "ready") {
    tasks::ServiceWaitReady p;
    if (const TaskInfo* launch = Standalone(s) ? LastNodeTask(s, kServiceLaunchTask, 0) : nullptr) {
      p = BuildWaitReadyPayload(PayloadOf<tasks::ServiceLaunch>(*launch),
                                RecordedOf<results::ServiceLaunchResult>(*launch), d.now_ms());
    } else {
      const int64_t timeout_s = Spec(s).attach_ready_timeout_s();
      p.set_runtime_dir(svc.runtime_dir());
      if (svc.has_pid()) p.set_pid(svc.pid());
      if (svc.has_port()) p.set_port(static_cast<int32_t>(svc.port()));
      p.set_served_model_name(v.ServedName());
      p.set_health_timeout_s(timeout_s);
      p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
    }
    p.set_step(step);
    if (ReadyTakesSnapshot(v)) {
      tasks::MemoryNpuSmi snap;
      snap.set_step("after_ready");
      snap.set_phase("after_ready");
      *p.mutable_then_snapshot() = snap;
      *p.mutable_then_logs() = LogsPayload(v, svc, rt);
    }
    d.Schedule(p);
    if (Multi(s)) WatchNodes(d, 1, kNodeWatchPollS);
  } else if (step == "vllm_log") {
    tasks::MemoryLogs p = LogsPayload(v, svc, rt);
    send(p);
  } else if (step == "inference") {
    tasks::MemoryInfer p;
    p.set_step(step);
    if (svc.has_port()) p.set_port(static_cast<int32_t>(svc.port()));
    p.set_served_model_name(v.ServedName());
    p.set_prompt(Spec(s).prompt());
    if (Spec(s).has_image_url()) p.set_image_url(Spec(s).image_url());
    p.set_max_tokens(Spec(s).max_tokens());
    p.set_timeout_s(600);
    p.set_server_scheduled_ms(d.now_ms());
    if (InferTakesSnapshot(v)) {
      tasks::MemoryNpuSmi snap;
      snap.set_step("after_infer");
      snap.set_phase("after_infer");
      *p.mutable_then_snapshot() = snap;
    }
    d.Schedule(p);
  } else if (step == "stopped") {
    // Forced (SIGKILL) on cancel, or after a graceful stop left it running.
    const bool force = s.cancel_requested || v.data.has_stop_escalated();
    // A standalone step (memory_profile_steps.cc): the spec holds stop_grace_s.
    tasks::ServiceStop p = BuildStopPayload(v.RuntimeDir(), v.Pid(), force, Spec(s).stop_grace_s());
    // The graceful stop already sent SIGINT and SIGTERM and waited out both
    // graces: the escalation goes straight to SIGKILL (a hung msprof would
    // otherwise cost both graces again).
    if (v.data.stop_escalated().error_kind() == "still_running") p.set_kill_at_once(true);
    // Its deadline counts from now: the stop's graces come first.
    if (FlushWithStop(v, force))
      *p.mutable_then_flush() = FlushPayload(d, v, v.svc, 0, (2 * Spec(s).stop_grace_s() + 60) * 1000);
    p.set_step(step);
    d.Schedule(p);
  } else if (step == "weights") {
    // The service's model and parallel sizes, else the spec's (standalone
    // fills them; an attached record names them). A deployment's dp is the
    // whole deployment's: EP = TP x DP over every node.
    const auto or_spec = [](int64_t from_service, int64_t from_spec) {
      return static_cast<int32_t>(from_service != 0 ? from_service : from_spec != 0 ? from_spec : 1);
    };
    tasks::MemoryWeights p;
    p.set_step(step);
    p.set_model(!svc.model().empty() ? svc.model() : Spec(s).model());
    p.set_tp(or_spec(svc.tp(), Spec(s).tp()));
    p.set_dp(Multi(s) ? static_cast<int32_t>(Spec(s).dp()) : or_spec(svc.dp(), Spec(s).dp()));
    p.set_expert_parallel(v.ExpertParallel());
    d.Schedule(p);
  } else if (step == "flushed") {
    tasks::MemoryWaitFlush p = FlushPayload(d, v, svc, node, 0);
    send(p);
  } else if (step == "export") {
    tasks::MemoryExport p;
    p.set_step(step);
    p.set_msprof_dir(msprof_dir);
    p.set_stdout_log(v.LogOf(svc.stdout_log(), svc.runtime_dir(), "stdout.log"));
    p.set_timeout_s(Spec(s).export_timeout_s() + 60);
    send(p);
  } else if (step == "profile_start" || step == "profile_stop") {
    auto p = OperatorMemoryControl(step, svc.has_port() ? std::optional<int64_t>(svc.port()) : std::nullopt);
    send(p);
  } else if (step == "operator_memory") {
    auto p = OperatorMemoryTask(Spec(s), rt, step);
    send(p);
  } else if (step == "msprof") {
    tasks::MemoryCollectCsvs p = CollectPayload(s, msprof_dir, node);
    send(p);
  }
}

// The steps marked early (memory_profile_steps.h) right after `step`: their
// tasks run beside it. Only on the way to a good end, and once each. A
// deployment runs its per-node steps in turn (each node's answer is judged
// with the others').
std::vector<const MemStep*> EarlyStepsAfter(const RunState& s, const std::string& step) {
  std::vector<const MemStep*> out;
  const auto steps = MemoryStepsOf(Mode(s));
  size_t i = 0;
  while (i < steps.size() && steps[i].name != step) ++i;
  for (++i; i < steps.size() && steps[i].early; ++i) {
    if (Multi(s) && MemPerNodeStep(steps[i].name)) break;
    out.push_back(&steps[i]);
  }
  return out;
}

void ScheduleEarlyStep(Decision& d, const View& v, const std::string& step) {
  const RunState& s = v.s;
  if (v.data.has_failure() || s.cancel_requested) return;
  for (const MemStep* early : EarlyStepsAfter(s, step)) {
    const std::string name(early->name);
    if (v.Done(name) || StepTaskSent(s, name)) continue;  // done, or scheduled already (answered or still running)
    ScheduleOn(d, v, name, 0);
  }
}

bool TakeFlushFromStop(Decision& d);
bool TakeAfterReadyFromReady(Decision& d);
bool TakeAfterInferFromInference(Decision& d);

void Schedule(Decision& d, const View& v, const std::string& step) {
  const RunState& s = v.s;
  MoveTo(d, step);  // the run's state is the step in progress
  // The stop already answered for the flush wait (then_flush): its answer is
  // recorded as the wait's would be, and the walk goes on.
  if (step == "flushed" && !Multi(s) && TakeFlushFromStop(d)) return Advance(d);
  // The readiness wait already took the after-ready snapshot and the log
  // read (then_snapshot, then_logs): recorded as their tasks' answers would be.
  if (step == "after_ready" && !Multi(s) && TakeAfterReadyFromReady(d)) return Advance(d);
  // Likewise the inference for the after-inference snapshot (then_snapshot).
  if (step == "after_infer" && !Multi(s) && TakeAfterInferFromInference(d)) return Advance(d);
  if (Multi(s) && step == "stopped") {
    ScheduleNodeStops(d);
    // The clocks again as the services stop (their last moment up), for a
    // deployment whose start was measured; the run ends once it answered.
    const TaskInfo* clock = LastTask(s, kMachineClockTask);
    if (clock != nullptr && PayloadOf<tasks::MachineClock>(*clock).when() != "end") ScheduleClock(d, "end");
    return ScheduleEarlyStep(d, v, step);  // the headers beside the stop
  }
  // A deployment's clocks are measured with the head's launch (once).
  if (Multi(s) && Standalone(s) && step == "service" && LastTask(s, kMachineClockTask) == nullptr)
    ScheduleClock(d, "start");
  if (Multi(s) && step == "service" && v.data.has_service()) {
    // The head is up: every other node not launched with it (a run launched
    // head-first), with the head's RPC port.
    const TaskInfo* head = LastNodeTask(s, kServiceLaunchTask, 0);
    const RunState& run = d.state();
    return LaunchHeadlessNodes(d, RecordedOf<results::ServiceLaunchResult>(*head),
                               [&run](int node, std::optional<int32_t> port) { return HeadlessLaunch(run, node, port); });
  }
  if (step == "flushed") {
    // flush_s is a minimum before the wait polls (0 = none).
    const int64_t min_s = Spec(s).flush_s();
    if (min_s > 0 && !v.data.has_flush_min()) {
      d.ScheduleTimer("flush", min_s * 1000);
      return;
    }
  }
  if (!Multi(s) || !MemPerNodeStep(step) || step == "service") {
    ScheduleOn(d, v, step, 0);
    if (Multi(s) && step == "service") {
      // Every node at once, each told the deployment's RPC port.
      const RunState& run = d.state();
      LaunchAllNodes(d, DeploymentRpcPort(Spec(s), s.run_id),
                     [&run](int node, std::optional<int32_t> port) { return HeadlessLaunch(run, node, port); });
    }
  } else {
    for (int i = 0; i < NodeCount(s); ++i)
      if (i == 0 ? !MemStepDone(v.data, step) : !MemNodeStepDone(s, i, step)) ScheduleOn(d, v, step, i);
  }
  if (step == "export") d.ScheduleTimer("export_timeout", Spec(s).export_timeout_s() * 1000);
  ScheduleEarlyStep(d, v, step);  // the headers beside the stop
}

// The cancel of a run whose data cannot be read: no step can be judged from
// the evidence, but what the launch may have started is still stopped (once,
// forced: the launch's runtime dir, its recorded pid if it can be read, else
// the handler reads the pid file), and the run ends cancelled.
void CancelUnread(Decision& d, const std::string& why) {
  const RunState& s = d.state();
  const TaskInfo* launch = Standalone(s) ? LastTask(s, kServiceLaunchTask) : nullptr;
  if (launch != nullptr && !LaunchStartedNothing(*launch) && LastTask(s, kServiceStopTask) == nullptr) {
    std::string rt = PayloadOf<tasks::ServiceLaunch>(*launch).runtime_dir();
    std::optional<int64_t> pid;
    if (auto r = RecordedResult<results::ServiceLaunchResult>(*launch); r.ok()) {
      if (!r->runtime_dir().empty()) rt = r->runtime_dir();
      if (r->pid() != 0) pid = r->pid();
    }
    MoveTo(d, "stopped");
    tasks::ServiceStop p = BuildStopPayload(rt, pid, /*force=*/true, Spec(s).stop_grace_s());
    p.set_step("stopped");
    (void)d.Schedule(p);
    return;
  }
  d.Finish(RunStatus::kCancelled, "cancelled; the run's evidence could not be read: " + why);
}

// The planner: schedules the next missing step, or finishes. It reads the
// run's data after the events the decision emitted so far (one decode here;
// the handlers that read it before recording decode once more).
void Advance(Decision& d) {
  const RunState& s = d.state();
  if (s.terminal || Busy(s) || d.failed()) return;
  std::string why;
  const std::optional<View> read = TryView(s, &why);
  if (!read) {
    // A decision fails its input (the broker then cancels the run); the
    // cancel must still end the run and stop its service.
    if (!s.cancel_requested) throw std::logic_error(why);
    return CancelUnread(d, why);
  }
  const View& v = *read;
  bool launched = Standalone(s) && v.data.has_launch_attempted() && !LaunchNeverHappened(s);
  if (Standalone(s) && Multi(s)) {
    launched = false;
    for (int i = 0; i < NodeCount(s); ++i) launched = launched || NodeServiceOf(s, i).has_value();
  }

  if (v.data.has_failure() || s.cancel_requested) {
    for (const MemStep& step : MemoryStepsOf(Mode(s))) {
      const bool runs = step.cleanup == MemCleanup::kOnFailureOrCancel ||
                        (step.cleanup == MemCleanup::kOnFailure && !s.cancel_requested);
      if (!launched || !runs || v.Done(step.name)) continue;
      if (StepInFlight(s, step.name)) return;  // it runs already (beside the step before): its answer comes first
      return Schedule(d, v, std::string(step.name));
    }
    // A service that refused to start because its KV cache would be
    // negative: its model's config and headers are read after the stop (the
    // advice predicts the KV tokens of its remedy from them, docs/ADVISE.md).
    if (launched && !Multi(s) && !s.cancel_requested && KvRefused(s) && !v.Done("weights") &&
        !StepTaskSent(s, "weights"))
      return Schedule(d, v, "weights");
    if (ClockPending(s) || EarlyPending(s)) return;  // a run ends after every task it scheduled
    if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
    std::string err = v.data.failure().error().empty() ? "memory-profile failed" : v.data.failure().error();
    if (v.data.stopped().never_started()) err += " — the service was never launched";
    if (Multi(s))
      for (const std::string& gone : NodesGoneBeforeTheStop(s)) err += "; " + gone;
    return d.Finish(RunStatus::kFailed, err);
  }

  const std::string at = s.state;  // the state this walk starts from
  bool past_at = false;
  for (const MemStep& step : MemoryStepsOf(Mode(s))) {
    if (v.Skipped(step.skip)) continue;
    if (step.wait) return MoveTo(d, std::string(step.name));
    if (v.Done(step.name)) {
      // An early step whose task answered before the step it runs beside:
      // the run still passes through its state, so the states (and the
      // events) a run goes through do not depend on which of the two
      // answered first.
      if (step.early && past_at) MoveTo(d, std::string(step.name));
      if (step.name == at) past_at = true;
      continue;
    }
    // Its task runs already (beside the step before): the walk waits for it here.
    if (step.early && EarlyPending(s)) return MoveTo(d, std::string(step.name));
    // A deployment's stop: once every node was checked alive after the inference.
    if (step.name == "stopped" && (NodeCheckArmed(s) || NodeCheckOut(s))) return;
    // The collection cuts each node's series on its own clock: it waits for
    // the clock measure's answer (measured or not).
    if (step.name == "msprof" && StartClockPending(s)) return MoveTo(d, std::string(step.name));
    return Schedule(d, v, std::string(step.name));
  }
  if (ClockPending(s)) return;
  d.Finish(RunStatus::kOk);
}

// The collection's answer (memory.collect_csvs', or the flush wait's
// `collected`) as node i's msprof record: each row's CSV blob, the blobs,
// the export's status, the clock its series was cut on.
void RecordCollected(Decision& d, const json& answer, const json& blobs, int node) {
  json m = answer;
  for (const char* part : {"module_mem", "npu_mem", "activation_peaks"}) {
    if (!m.contains(part) || !m[part].is_array()) continue;
    for (auto& r : m[part])
      r["blob"] = blobs.is_object() ? blobs.value("msprof_csvs/" + r.value("file", ""), "") : "";
  }
  json csv_blobs = json::object();
  if (blobs.is_object())
    for (const auto& [name, sha] : blobs.items())
      if (name.rfind("msprof_csvs/", 0) == 0) csv_blobs[name] = sha;
  m["blobs"] = csv_blobs;
  const json& exported = MemNodeField(d.state(), node, "export");
  const std::string export_status = exported.is_object() ? exported.value("status", "") : "";
  m["status"] = !exported.is_object()  ? "not_exported"
                : export_status.empty() ? "ok"
                                        : export_status;
  // A deployment's other node: on which clock its series was cut (the
  // head's is cut on its own clock, or on the server's as for one node).
  if (node > 0)
    if (json clock = NodeWindowOf(d.state(), node).clock; !clock.is_null()) m["window_clock"] = std::move(clock);
  RecordOn(d, node, "msprof", m);
}

// The flush wait's answer (memory.wait_flush's, or a stop's `flushed`) as
// node i's records: flushed, then, where the wait also found msprof's own
// export complete and read its CSVs, export and msprof, passing through
// their states as when their tasks ran.
void RecordFlushed(Decision& d, const json& answer, bool with_collection, const json& blobs, int node) {
  json r = answer;
  r.erase("exported");
  r.erase("collected");
  r["min_wait_s"] = Spec(d.state()).flush_s();
  RecordOn(d, node, "flushed", r);
  if (with_collection) {
    MoveTo(d, "export");
    RecordOn(d, node, "export", answer.at("exported"));
    MoveTo(d, "msprof");
    RecordCollected(d, answer.at("collected"), blobs, node);
  }
}

// The head's last stop answered for the flush wait (ServiceStop.then_flush):
// records its answer as the wait's (RecordFlushed); false when it did not.
bool TakeFlushFromStop(Decision& d) {
  const TaskInfo* stop = LastNodeTask(d.state(), kServiceStopTask, 0);
  if (stop == nullptr || stop->status != TaskStatus::kSucceeded) return false;
  const auto r = RecordedOf<results::ServiceStopResult>(*stop);
  if (!r.has_flushed()) return false;
  const json& answer = Field(Field(stop->result, "result"), "flushed");
  if (!answer.is_object()) return false;
  RecordFlushed(d, answer, r.flushed().has_exported() && r.flushed().has_collected(), Field(stop->result, "blobs"),
                0);
  return true;
}

// The readiness wait answered for the after-ready snapshot and the log read
// (then_snapshot, then_logs): records each part it holds and the run has not
// recorded yet, as its task's answer would be; true when it recorded any.
bool TakeAfterReadyFromReady(Decision& d) {
  const TaskInfo* ready = LastNodeTask(d.state(), kServiceWaitReadyTask, 0);
  if (ready == nullptr || ready->status != TaskStatus::kSucceeded) return false;
  const auto r = RecordedOf<results::ServiceWaitReadyResult>(*ready);
  const json& answer = Field(ready->result, "result");
  const json& blobs = Field(ready->result, "blobs");
  bool took = false;
  if (r.has_vllm_log() && !d.state().data.contains("vllm_log") && Field(answer, "vllm_log").is_object()) {
    RecordLogs(d, 0, answer.at("vllm_log"), blobs);
    took = true;
  }
  if (r.has_after_ready() && !d.state().data.contains("after_ready") && Field(answer, "after_ready").is_object()) {
    RecordSnapshot(d, 0, "after_ready", answer.at("after_ready"), blobs);
    took = true;
  }
  return took;
}

// The inference answered for the after-inference snapshot (then_snapshot):
// records it as memory.npu_smi's answer would be; false when it did not.
bool TakeAfterInferFromInference(Decision& d) {
  const TaskInfo* infer = LastNodeTask(d.state(), kMemInferTask, 0);
  if (infer == nullptr || infer->status != TaskStatus::kSucceeded || d.state().data.contains("after_infer"))
    return false;
  if (!RecordedOf<results::MemoryInferResult>(*infer).has_after_infer()) return false;
  const json& part = Field(Field(infer->result, "result"), "after_infer");
  if (!part.is_object()) return false;
  RecordSnapshot(d, 0, "after_infer", part, Field(infer->result, "blobs"));
  return true;
}

bool CriticalStep(const RunState& s, const std::string& step) {
  for (const MemStep& st : MemoryStepsOf(Mode(s)))
    if (st.name == step) return st.critical;
  return false;
}

std::string FailureText(const std::string& step, const TaskFailure& f) {
  return f.error_kind().empty() ? fmt::format("{}: {}", step, f.error())
                                : fmt::format("{} ({}): {}", step, f.error_kind(), f.error());
}

json BaselineFromSpec(const RunState& s) {
  const json& rec = Field(s.spec, "baseline_run_record");
  if (rec.is_object()) {
    const json& data = Field(rec, "data");
    const json& b = Field(data, "baseline");
    if (b.is_object() && b.contains("hbm"))
      return json{{"hbm", b["hbm"]}, {"source", "baseline_run"}, {"origin", Spec(s).baseline_run()},
                  {"blob", b.value("blob", "")}, {"file", "baseline_npu_smi.txt"}};
    const json& p = Field(data, "probe");
    if (p.is_object() && p.contains("hbm"))
      return json{{"hbm", p["hbm"]}, {"source", "baseline_run"}, {"origin", Spec(s).baseline_run()},
                  {"blob", StrField(Field(p, "evidence"), "npu_smi_info.txt", "")}, {"file", "baseline_npu_smi.txt"}};
  }
  if (s.spec.contains("baseline_hbm") && s.spec["baseline_hbm"].is_object())
    return json{{"hbm", s.spec["baseline_hbm"]}, {"source", "baseline_file"},
                {"origin", Spec(s).baseline_origin()}, {"blob", ""}, {"file", "baseline_npu_smi.txt"}};
  return nullptr;
}

}  // namespace

// ---- RunKind hooks -------------------------------------------------------

const TransitionTable& MemoryProfileMachine::transitions() const {
  return MemoryProfileTable();
}

Status MemoryProfileMachine::ValidateSpec(json& spec) const { return ValidateMemorySpec(spec); }

std::optional<DeviceNeed> MemoryProfileMachine::DevicesNeeded(const RunState& s) const {
  // attach observes a serve run's service (that run holds the devices);
  // install_wrapper only writes a script.
  if (Mode(s) != "standalone") return std::nullopt;
  return ServiceDeviceNeed(s, Spec(s));
}

std::optional<tasks::ServiceLaunch> MemoryProfileMachine::SpecService(const RunState& s) const {
  if (!Standalone(s)) return std::nullopt;
  return StandaloneService(s);
}

void MemoryProfileMachine::OnStart(Decision& d) const {
  const RunState& s = d.state();
  if (!Standalone(s)) {
    json b = BaselineFromSpec(s);
    if (!b.is_null()) Record(d, "baseline", b);
  }
  if (Mode(s) == "attach") {
    // The serve run's record as the broker added it at submit: it had ended
    // when it names when.
    const auto& rec = Spec(s).attach_run_record().fields();
    const auto text = [&rec](const char* key) -> std::optional<std::string> {
      const auto it = rec.find(key);
      if (it == rec.end() || !it->second.has_string_value()) return std::nullopt;
      return it->second.string_value();
    };
    if (text("finished_at"))
      Record(d, "serve_ended", json{{"run_id", Spec(s).attach_run()}, {"status", text("status").value_or("")},
                                    {"state", text("state").value_or("")}, {"at_submit", true}});
    else
      d.WatchRun(Spec(s).attach_run());
  }
  Advance(d);
}

void MemoryProfileMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  const std::string step = StepOf(task);
  // Facts are recorded from the answer as it came (the run's evidence; a
  // success without a result records as {}); decisions read its message.
  static const json kNone = json::object();
  const json& answer = result.recorded().is_object() ? result.recorded() : kNone;
  // The node the task ran on (0: the head, or a one-node run).
  if (OnClockTaskSucceeded(d, task, result)) return Advance(d);
  const int node = Multi(d.state()) ? NodeOfTask(d.state(), task) : 0;
  // A watch ended without a death (abandoned at the stop), or a node's check
  // found its process group. Under msprof's wrap the group's leader is
  // msprof, which outlives vLLM (it flushes and exports after its
  // application exits): msprof alone left means vLLM is gone.
  if (task.kind == kServiceWatchTask) {
    const int64_t members = result.As<results::ServiceWatchResult>().members_left();
    if (IsNodeCheck(task) && members < 2 && NodeWrapped(d.state(), node))
      NodeLost(d, node,
               fmt::format("only msprof's process was left of its service ({} live member(s)): vLLM had exited",
                           members));
    return Advance(d);
  }
  if (task.kind == kMemPreflightTask) {
    RecordOn(d, node, "preflight", answer);
  } else if (task.kind == kMemNpuSmiTask) {
    RecordSnapshot(d, node, step, answer, Field(task.result, "blobs"));
  } else if (task.kind == kServiceLaunchTask) {
    (void)result.Required<results::ServiceLaunchResult>();  // where the service runs: the next steps need it
    RecordOn(d, node, "service", ServiceRecordFromLaunch(task.payload, answer));
  } else if (task.kind == kServiceStopTask && Multi(d.state())) {
    // A deployment's stop: the shared node lifecycle reads each node's answer
    // from its task; the deployment's record is written once every node is settled.
  } else if (task.kind == kServiceWaitReadyTask) {
    // The parts it took after readiness (then_snapshot, then_logs) are
    // recorded where the walk reaches them (TakeAfterReadyFromReady).
    json r = answer;
    for (const char* part : {"after_ready", "vllm_log", "then_ms"}) r.erase(part);
    // The ready instant the activation's idle level is taken after: the
    // answer's, less what the task did after it saw the service ready.
    const int64_t then_ms = std::max<int64_t>(0, result.As<results::ServiceWaitReadyResult>().then_ms());
    r["server_answered_ms"] = d.now_ms() - then_ms;
    Record(d, "ready", r);
  } else if (task.kind == kMemLogsTask) {
    RecordLogs(d, node, answer, Field(task.result, "blobs"));
  } else if (task.kind == kMemInferTask) {
    // The snapshot it took after its request (then_snapshot) is recorded
    // where the walk reaches it (TakeAfterInferFromInference).
    json r = answer;
    r.erase("after_infer");
    r.erase("then_ms");
    r["blob"] = BlobOf(task, "inference_response.json");
    const int64_t scheduled_ms = PayloadOf<tasks::MemoryInfer>(task).server_scheduled_ms();
    if (scheduled_ms > 0) {  // 0: an older payload that did not say
      const auto data = DataOf<Data>(d.state());
      // The request's end: the answer, less the snapshot's time after it.
      const int64_t then_ms = std::max<int64_t>(0, result.As<results::MemoryInferResult>().then_ms());
      const int64_t end_ms = std::max(scheduled_ms, d.now_ms() - then_ms);
      r["server_window_ms"] = {{"start_ms", scheduled_ms}, {"end_ms", end_ms},
                               {"ready_ms", data.ready().server_answered_ms() != 0
                                                ? json(data.ready().server_answered_ms())
                                                : json()}};  // null: not recorded
    }
    Record(d, "inference", r);
    if (Multi(d.state())) CheckNodesAlive(d, 1);
  } else if (task.kind == kServiceStopTask) {
    // The flush wait it answered too (then_flush) is recorded where the walk
    // reaches it (TakeFlushFromStop).
    json stopped = answer;
    stopped.erase("flushed");
    Record(d, "stopped", stopped);
    // An answer that does not say is read as stopped, as ServiceOf shows it.
    const auto& stop = result.As<results::ServiceStopResult>();
    if (stop.has_stopped() && !stop.stopped() && !stop.already_gone())
      Failing(d, "the service could not be stopped: " + answer.dump(-1, ' ', false, json::error_handler_t::replace));
  } else if (task.kind == kMemWeightsTask) {
    const auto& found = result.As<results::MemoryWeightsResult>();
    if (found.weights().has_struct_value()) {
      json w = answer.at("weights");
      w["blob"] = BlobOf(task, "weight_manifest.json");
      w["file"] = "weight_manifest.json";
      Record(d, "weights", w);
    } else {
      d.Emit(kMemStepFailed, json{{"step", "weights"}, {"error_kind", "no_safetensors"},
                                  {"error", "no readable *.safetensors headers in the model dir"}});
    }
    if (found.theory().has_struct_value()) Record(d, "theory", answer.at("theory"));
    Record(d, "model_config", json{{"content", answer.value("config", json(nullptr))},
                                   {"blob", BlobOf(task, "config.json")}, {"file", "model_config.json"}});
  } else if (task.kind == kMemWaitFlushTask) {
    // With msprof's own export found complete, the wait's command also
    // answered for the export and the collection: three records and the
    // states between them, in the walk's order.
    const auto& flushed = result.As<results::MemoryWaitFlushResult>();
    RecordFlushed(d, answer, flushed.has_exported() && flushed.has_collected(), Field(task.result, "blobs"), node);
  } else if (task.kind == kMemExportTask) {
    RecordOn(d, node, "export", answer);
    if (View(d.state()).Done("export"))  // every node's
      for (const auto& [id, t] : d.state().timers)
        if (t.armed && t.purpose == "export_timeout") d.CancelTimer(id);
  } else if (task.kind == kTpControlTask) {
    json r = answer;
    r["blob"] = BlobOf(task, step + "_response.txt");
    Record(d, step, r);  // data.profile_start / profile_stop
    const auto& ctl = result.As<results::TorchProfileControlResult>();
    if (!ctl.ok())
      d.Emit(kMemStepFailed,
             json{{"step", "operator_memory_window"}, {"error_kind", "profile_http_failed"},
                  {"error", fmt::format("POST /{} answered {}: the operator memory may be missing", ctl.action(),
                                        ctl.status().has_number_value() ? fmt::format("{}", ctl.status().number_value())
                                                                        : std::string("nothing"))}});
  } else if (task.kind == kMemOperatorMemoryTask) {
    json r = answer;
    r["blob"] = BlobOf(task, "operator_memory_digest.json");
    r["file"] = "operator_memory_digest.json";
    Record(d, "operator_memory", r);
  } else if (task.kind == kMemCollectTask) {
    RecordCollected(d, answer, Field(task.result, "blobs"), node);
  }
  Advance(d);
}

void MemoryProfileMachine::OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  if (IsClockTask(task)) return Advance(d);  // no offsets then: each node is cut at the head's window
  const std::string step = StepOf(task);
  const RunState& s = d.state();
  if (Multi(s)) {
    const int node = NodeOfTask(s, task);
    const std::string where = fmt::format("node {} ({})", node, NodeMachine(s, node));
    // A deployment's stop: the shared lifecycle escalates an unforced stop
    // and judges every node once all are settled.
    if (task.kind == kServiceStopTask) return Advance(d);
    if (task.kind == kServiceWatchTask) {
      NodeLost(d, node, failure.Text());  // a headless node's service died while the run used it
      return Advance(d);
    }
    StepFailed(d, MemNodeStepKey(step, node), failure);
    // The inference failed: a node lost during it is named by its check before the stop.
    if (task.kind == kMemInferTask) CheckNodesAlive(d, 1);
    if (task.kind == kMemExportTask && View(d.state()).Done("export"))
      for (const auto& [id, t] : d.state().timers)
        if (t.armed && t.purpose == "export_timeout") d.CancelTimer(id);
    if (CriticalStep(s, step)) {
      const bool never = task.kind == kServiceLaunchTask && LaunchStartedNothing(task);
      Failing(d, where + ": " + FailureText(step, failure) +
                     (never ? " — the service was never launched (nothing to stop)" : ""));
    }
    return Advance(d);
  }
  // A graceful stop that left the service running escalates once to SIGKILL:
  // the run never leaves a service it started behind.
  if (task.kind == kServiceStopTask && !PayloadOf<tasks::ServiceStop>(task).force() &&
      !DataOf<Data>(d.state()).has_stop_escalated()) {
    Record(d, "stop_escalated", json{{"error_kind", failure.error_kind()}, {"error", failure.error()}});
    return Advance(d);
  }
  StepFailed(d, step, failure);
  if (task.kind == kMemExportTask) {
    for (const auto& [id, t] : d.state().timers)
      if (t.armed && t.purpose == "export_timeout") d.CancelTimer(id);
  }
  if (CriticalStep(d.state(), step)) {
    const bool never = task.kind == kServiceLaunchTask && LaunchStartedNothing(task);
    Failing(d, FailureText(step, failure) + (never ? " — the service was never launched (nothing to stop)" : ""));
  }
  Advance(d);
}

void MemoryProfileMachine::OnTimer(Decision& d, const TimerInfo& timer) const {
  if (timer.purpose == "flush") {
    Record(d, "flush_min", json{{"flush_s", Spec(d.state()).flush_s()}});  // next: the wait task
  } else if (timer.purpose == "export_timeout") {
    if (View(d.state()).Done("export")) return;
    for (const auto& [id, t] : d.state().tasks)
      if (t.kind == kMemExportTask && (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait))
        d.Emit(ev::kTaskAbandoned, json{{"task_id", id}, {"reason", "msprof export timed out"}});
    const json timed_out = {{"status", "export_timeout"}, {"timeout_s", Spec(d.state()).export_timeout_s()}};
    for (int i = 0; i < NodeCount(d.state()); ++i)
      if (i == 0 ? !d.state().data.contains("export") : !MemNodeStepDone(d.state(), i, "export"))
        RecordOn(d, i, "export", timed_out);
  }
  Advance(d);
}

bool MemoryProfileMachine::AcceptsSignal(std::string_view name) const {
  return name == ev::kSignalWatchedRunFinished;
}

void MemoryProfileMachine::OnSignal(Decision& d, const std::string& name, const json& payload) const {
  if (name != ev::kSignalWatchedRunFinished || d.state().data.contains("serve_ended")) return;
  json rec = {{"run_id", payload.value("run_id", "")}, {"status", payload.value("status", "")},
              {"state", payload.value("state", "")}};
  const json& svc = Field(Field(payload, "summary"), "service");
  if (svc.is_object()) rec["summary"] = json{{"service", svc}};
  Record(d, "serve_ended", rec);
  Advance(d);
}

void MemoryProfileMachine::OnCancel(Decision& d) const {
  d.AbandonOutstanding("run cancelled");
  CancelNodeCheck(d);
  Advance(d);
}

void MemoryProfileMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& p) const {
  if (ApplyClockEvent(s, type, p)) return;
  if (const std::string_view field = MemoryFieldOf(type); !field.empty()) {
    s.data[std::string(field)] = p;
  } else if (type == kMemRecorded) {
    s.data[p.value("field", "unknown")] = p.value("value", json(nullptr));
  } else if (type == kMemStepFailed) {
    s.data["step_failures"][p.value("step", "unknown")] = {{"error_kind", p.value("error_kind", "")},
                                                            {"error", p.value("error", "")}};
  } else if (type == kMemRunFailing) {
    if (!s.data.contains("failure")) s.data["failure"] = p;
  } else if (type == kMemNodeEvidence) {
    ApplyMemNodeEvidence(s, p);
  }
}

namespace {

// The devices of node i of a deployment: its launch record's, else its spec's.
json NodeDevices(const RunState& s, int node) {
  const json& launched = Field(MemNodeField(s, node, "service"), "devices");
  if (launched.is_array()) return launched;
  const json& spec = Field(Field(s.spec, "nodes")[node], "devices");
  return spec.is_array() ? spec : json::array();
}

// The report input of every node of a deployment but the head: each node's
// own snapshots, log and msprof series; the weights read on the head (EP
// over every node); the world rank of its first device.
json OtherNodesEvidence(const View& v, const json& head) {
  const RunState& s = v.s;
  json out = json::array();
  const int64_t per_node = head.value("tp", int64_t{1}) * DpLocal(Spec(s));
  for (int i = 1; i < NodeCount(s); ++i) {
    json n = {{"node", i},
              {"machine", NodeMachine(s, i)},
              {"mode", head["mode"]},
              {"tp", head["tp"]},
              {"dp", head["dp"]},
              {"rank_offset", i * per_node},
              {"devices", NodeDevices(s, i)}};
    for (const char* f : {"baseline", "after_ready", "after_infer", "vllm_log", "msprof"})
      if (const json& r = MemNodeField(s, i, f); r.is_object()) n[f] = r;
    for (const char* f : {"weights", "theory"})
      if (head.contains(f)) n[f] = head[f];
    if (!n.contains("msprof")) {
      const json& exported = MemNodeField(s, i, "export");
      const std::string st = exported.is_object() ? exported.value("status", "") : "";
      n["msprof"] = json{{"status", st.empty() ? "not_collected" : st},
                         {"module_mem", json::array()},
                         {"npu_mem", json::array()}};
    }
    out.push_back(std::move(n));
  }
  return out;
}

// The report's input (memory_report.h) from what one projection decoded.
json EvidenceOf(const View& v) {
  const RunState& s = v.s;
  // The service's parallel sizes and devices, else the spec's.
  const auto or_spec = [](int64_t from_service, int64_t from_spec) {
    return from_service != 0 ? from_service : from_spec != 0 ? from_spec : 1;
  };
  json devices = Field(v.service, "devices");
  if (!devices.is_array()) devices = Multi(s) ? NodeDevices(s, 0) : Field(s.spec, "devices");
  json ev = {{"mode", Mode(s)},
             {"tp", or_spec(v.svc.tp(), Spec(s).tp())},
             {"dp", or_spec(v.svc.dp(), Spec(s).dp())},
             {"devices", devices.is_array() ? devices : json::array()}};
  for (const char* f : {"baseline", "after_ready", "after_infer", "vllm_log", "msprof", "weights", "theory",
                        "operator_memory"})
    if (s.data.contains(f) && s.data[f].is_object()) ev[f] = s.data[f];
  if (!ev.contains("msprof")) {
    std::string st = v.Wrapped() ? "not_collected" : "not_wrapped";
    if (v.data.has_export_() && !v.data.export_().status().empty()) st = v.data.export_().status();
    ev["msprof"] = json{{"status", st}, {"module_mem", json::array()}, {"npu_mem", json::array()}};
  }
  ev["machine"] = Multi(s) ? NodeMachine(s, 0) : s.machine;
  if (Multi(s) && Standalone(s)) ev["nodes"] = OtherNodesEvidence(v, ev);
  return ev;
}

json SummaryOf(const MemoryProfileMachine& kind, const View& v) {
  const RunState& s = v.s;
  json j = kind.RunKind::Summary(s);
  j["mode"] = Mode(s);
  j["service"] = v.service.empty() ? json(nullptr) : v.service;
  if (v.data.has_preflight()) j["wrap_script"] = v.data.preflight().wrap_script();
  if (s.data.contains("step_failures")) j["step_failures"] = s.data["step_failures"];
  if (s.data.contains("baseline")) j["baseline"] = s.data["baseline"];
  if (s.data.contains("flushed")) j["flush"] = s.data["flushed"];
  if (Mode(s) != "install_wrapper") {
    const json report = BuildMemoryReport(EvidenceOf(v));
    json devs = json::array();
    for (const auto& d : report["devices"]) {
      json comps = json::object();
      for (const auto& c : d["components"]) comps[c.value("key", "")] = c["value_mb"];
      devs.push_back({{"machine", d.value("machine", json(nullptr))},
                      {"device_id", d["device_id"]},
                      {"hbm_used_mb", d["hbm_used_mb"]},
                      {"components_mb", comps}});
    }
    j["report_summary"] = {{"msprof", report["msprof"]}, {"devices", devs}};
    if (report.contains("nodes")) {
      j["report_summary"]["nodes"] = report["nodes"];
      j["report_summary"]["totals"] = report["totals"];
    }
  }
  if (Multi(s)) {
    j["nodes"] = NodesSummary(s);
    j["clock"] = ClockProjection(s);
  }
  return j;
}

}  // namespace

json MemoryEvidenceFromState(const RunState& s) { return EvidenceOf(View(s)); }

json MemoryProfileMachine::Summary(const RunState& s) const { return SummaryOf(*this, View(s)); }

json MemoryProfileMachine::Manifest(const RunState& s) const {
  const View v(s);
  const json evidence = EvidenceOf(v);
  json m = BuildMemoryManifest(s, SummaryOf(*this, v), BuildMemoryReport(evidence), v.service);
  // The advice over the run's evidence (memory_advice.h; `npuprof advise`).
  if (Mode(s) != "install_wrapper") m["advice"] = BuildMemoryAdvice(MemoryAdviceInput(s, evidence, m["report"]));
  // Each node's clock offset from the worker's (the series of every node on one clock).
  if (Multi(s)) m["clock_offsets"] = ClockProjection(s);
  return m;
}

void RegisterMemoryProfileKind(KindRegistry& r) { r.Register(std::make_unique<MemoryProfileMachine>()); }

}  // namespace npuprof::sm
