#include "statemachine/deployment_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "run_specs.pb.h"
#include "statemachine/decision.h"
#include "statemachine/event_types.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/service_spec.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_policies.h"
#include "statemachine/task_result.h"

namespace npuprof::sm {

int NodeCount(const RunState& s) {
  return IsMultiNodeSpec(s.spec) ? static_cast<int>(s.spec["nodes"].size()) : 1;
}

std::string NodeMachine(const RunState& s, int node) {
  if (!IsMultiNodeSpec(s.spec)) return node == 0 ? s.machine : "";
  const json& nodes = s.spec["nodes"];
  if (node < 0 || node >= static_cast<int>(nodes.size()) || !nodes[node].is_object()) return "";
  return nodes[node].value("machine", "");
}

int NodeOfTask(const RunState& s, const TaskInfo& task) {
  if (!IsMultiNodeSpec(s.spec)) return 0;
  const std::string m = TaskMachine(task);
  const json& nodes = s.spec["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].is_object() && nodes[i].value("machine", "") == m) return static_cast<int>(i);
  return 0;
}

const TaskInfo* LastNodeTask(const RunState& s, std::string_view kind, int node) {
  if (!IsMultiNodeSpec(s.spec)) return node == 0 ? LastTask(s, kind) : nullptr;
  const std::string m = NodeMachine(s, node);
  if (m.empty()) return nullptr;
  return LastTaskOn(s, kind, m);
}

std::string NodeRuntimeDir(const tasks::Machine& record, const std::string& run_id, int launch_no, int node) {
  return fmt::format("{}/{}/service-{}-node{}", RuntimeBaseOf(record.runtime_base()), run_id, launch_no, node);
}

template <class Spec>
tasks::ServiceLaunch BuildNodeLaunchPayload(const std::string& run_id, int launch_no, const Spec& spec, int node,
                                            std::optional<int32_t> rpc_port, const std::vector<std::string>& kind_args,
                                            const json& kind_env) {
  tasks::ServiceLaunch p = BuildLaunchPayload(run_id, launch_no, spec, kind_args, kind_env);
  const std::vector<DeploymentNodeInfo> nodes = DeploymentNodes(spec);
  if (nodes.size() < 2 || node < 0 || node >= static_cast<int>(nodes.size())) return p;
  const DeploymentNodeInfo& n = nodes[node];
  *p.mutable_machine() = n.record;
  p.set_runtime_dir(NodeRuntimeDir(n.record, run_id, launch_no, node));
  p.clear_devices();
  if (n.devices)
    for (int64_t d : *n.devices) p.add_devices(static_cast<int32_t>(d));
  const int64_t dp_local = DpLocal(spec);
  tasks::ServiceDeployment& dep = *p.mutable_deployment();
  dep.set_node(node);
  dep.set_nodes(static_cast<int32_t>(nodes.size()));
  dep.set_machine(n.machine);
  dep.set_dp_local(static_cast<int32_t>(dp_local));
  dep.set_dp_address(DpAddress(spec));
  dep.set_dp_start_rank(static_cast<int32_t>(node * dp_local));
  dep.set_headless(node > 0);
  if (spec.has_dp_rpc_port()) {
    dep.set_dp_rpc_port(spec.dp_rpc_port());
  } else if (rpc_port) {
    dep.set_dp_rpc_port(*rpc_port);
  }
  if (node > 0) p.clear_port();  // no API server on a headless node
  return p;
}

int32_t RunRpcPort(const std::string& key) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bits
  for (unsigned char c : key) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return kRpcPortFirst + static_cast<int32_t>(h % static_cast<uint64_t>(kRpcPortLast - kRpcPortFirst + 1));
}

template <class Spec>
int32_t DeploymentRpcPort(const Spec& spec, const std::string& run_id) {
  if (spec.has_dp_rpc_port()) return spec.dp_rpc_port();
  const std::vector<DeploymentNodeInfo> nodes = DeploymentNodes(spec);
  if (nodes.empty()) return RunRpcPort(run_id);
  const tasks::Machine& head = nodes[0].record;
  return RunRpcPort(fmt::format("{}@{}@{}:{}", run_id, head.user(), head.host(), head.port()));
}
template int32_t DeploymentRpcPort(const run_specs::ServeSpec&, const std::string&);
template int32_t DeploymentRpcPort(const run_specs::TorchProfileSpec&, const std::string&);
template int32_t DeploymentRpcPort(const run_specs::MemoryProfileSpec&, const std::string&);

#define NPUPROF_NODE_LAUNCH(S)                                                                                 \
  template tasks::ServiceLaunch BuildNodeLaunchPayload(const std::string&, int, const run_specs::S&, int,      \
                                                       std::optional<int32_t>, const std::vector<std::string>&, \
                                                       const json&);
NPUPROF_NODE_LAUNCH(ServeSpec)
NPUPROF_NODE_LAUNCH(TorchProfileSpec)
NPUPROF_NODE_LAUNCH(MemoryProfileSpec)
#undef NPUPROF_NODE_LAUNCH

std::optional<NodeService> NodeServiceOf(const RunState& s, int node) {
  const TaskInfo* launch = LastNodeTask(s, kServiceLaunchTask, node);
  if (!launch) return std::nullopt;
  const tasks::ServiceLaunch asked = PayloadOf<tasks::ServiceLaunch>(*launch);
  NodeService k;
  k.node = node;
  k.machine = NodeMachine(s, node);
  if (IsMultiNodeSpec(s.spec)) k.record = asked.machine();
  if (TaskResultData(launch).is_object()) {
    const auto r = RecordedOf<results::ServiceLaunchResult>(*launch);
    k.runtime_dir = r.runtime_dir().empty() ? asked.runtime_dir() : r.runtime_dir();
    if (r.pid() != 0) k.pid = r.pid();
    if (r.port().has_number_value()) k.port = static_cast<int64_t>(r.port().number_value());
    if (r.deployment().has_dp_rpc_port()) k.rpc_port = r.deployment().dp_rpc_port();
    k.launched = true;
    return k;
  }
  if (launch->status != TaskStatus::kFailed) return std::nullopt;  // still on its way
  if (LaunchStartedNothing(*launch)) return std::nullopt;
  k.runtime_dir = asked.runtime_dir();
  return k;
}

bool NodeStopConfirmed(const RunState& s, int node) {
  const TaskInfo* stop = LastNodeTask(s, kServiceStopTask, node);
  if (!TaskResultData(stop).is_object()) return false;
  const auto r = RecordedOf<results::ServiceStopResult>(*stop);
  return r.stopped() || r.already_gone() || r.never_started();
}

namespace {

// The last non-empty line of a stderr tail, at most 300 bytes.
std::string LastLine(const std::string& tail) {
  size_t end = tail.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  const size_t nl = tail.find_last_of('\n', end);
  const size_t start = nl == std::string::npos ? 0 : nl + 1;
  std::string line = tail.substr(start, end + 1 - start);
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

}  // namespace

std::vector<std::string> NodesGoneBeforeTheStop(const RunState& s) {
  std::vector<std::string> out;
  for (int i = 0; i < NodeCount(s); ++i) {
    const TaskInfo* stop = LastNodeTask(s, kServiceStopTask, i);
    if (!stop || !TaskResultData(stop).is_object()) continue;
    auto r = RecordedResult<results::ServiceStopResult>(*stop);
    if (!r.ok() || !r->already_gone() || r->never_started()) continue;
    const std::string line = LastLine(r->stderr_tail());
    out.push_back(fmt::format("node {} ({}) had exited before the stop{}", i, NodeMachine(s, i),
                              line.empty() ? "" : ": " + line));
  }
  return out;
}

tasks::ServiceStop BuildNodeStopPayload(const NodeService& svc, bool force, int64_t grace_s) {
  tasks::ServiceStop p = BuildStopPayload(svc.runtime_dir, svc.pid, force, grace_s);
  if (!svc.record.name().empty()) *p.mutable_machine() = svc.record;
  return p;
}

tasks::ServiceWatch BuildNodeWatchPayload(const NodeService& svc, int64_t poll_s) {
  tasks::ServiceWatch p = BuildWatchPayload(svc.runtime_dir, svc.pid, poll_s);
  if (!svc.record.name().empty()) *p.mutable_machine() = svc.record;
  return p;
}

namespace {

bool Out(const TaskInfo* t) { return t && (t->in_flight() || t->status == TaskStatus::kRetryWait); }

// The last stop of node i ended without confirming the service gone (it
// failed, or answered "not stopped").
bool StopDidNotConfirm(const RunState& s, int node) {
  const TaskInfo* stop = LastNodeTask(s, kServiceStopTask, node);
  return stop && !Out(stop) && !NodeStopConfirmed(s, node);
}

// ... and that stop was forced: nothing more to try.
bool ForcedStopFailed(const RunState& s, int node) {
  const TaskInfo* stop = LastNodeTask(s, kServiceStopTask, node);
  return StopDidNotConfirm(s, node) && PayloadOf<tasks::ServiceStop>(*stop).force();
}

// Node i needs (another) stop: a service that may run, no confirmed stop,
// no stop out, and not given up on.
bool NeedsStop(const RunState& s, int node) {
  const auto svc = NodeServiceOf(s, node);
  if (!svc) return false;
  if (NodeStopConfirmed(s, node) || ForcedStopFailed(s, node)) return false;
  return !Out(LastNodeTask(s, kServiceStopTask, node));
}

}  // namespace

void LaunchAllNodes(Decision& d, int32_t rpc_port, const NodeLaunchBuilder& build) {
  for (int i = 0; i < NodeCount(d.state()); ++i)
    if (!LastNodeTask(d.state(), kServiceLaunchTask, i)) d.Schedule(build(i, rpc_port));
}

void LaunchHeadlessNodes(Decision& d, const results::ServiceLaunchResult& head, const NodeLaunchBuilder& build) {
  std::optional<int32_t> rpc_port;
  if (head.deployment().has_dp_rpc_port()) rpc_port = head.deployment().dp_rpc_port();
  const int n = NodeCount(d.state());
  for (int i = 1; i < n; ++i)
    if (!LastNodeTask(d.state(), kServiceLaunchTask, i)) d.Schedule(build(i, rpc_port));
}

bool AllNodesLaunched(const RunState& s) {
  for (int i = 0; i < NodeCount(s); ++i) {
    const TaskInfo* t = LastNodeTask(s, kServiceLaunchTask, i);
    if (!t || t->status != TaskStatus::kSucceeded) return false;
  }
  return true;
}

bool NodeLaunchPending(const RunState& s) {
  for (int i = 0; i < NodeCount(s); ++i)
    if (Out(LastNodeTask(s, kServiceLaunchTask, i))) return true;
  return false;
}

void WatchNodes(Decision& d, int first, int64_t poll_s) {
  if (poll_s <= 0) return;
  for (int i = first; i < NodeCount(d.state()); ++i) {
    if (Out(LastNodeTask(d.state(), kServiceWatchTask, i))) continue;
    const auto svc = NodeServiceOf(d.state(), i);
    if (!svc || !svc->launched) continue;
    d.Schedule(BuildNodeWatchPayload(*svc, poll_s), ServeWatchPolicy(poll_s));
  }
}

bool IsNodeCheck(const TaskInfo& t) {
  return t.kind == kServiceWatchTask && PayloadOf<tasks::ServiceWatch>(t).once();
}

void CheckNodesAlive(Decision& d, int first) {
  for (int i = first; i < NodeCount(d.state()); ++i) {
    const auto svc = NodeServiceOf(d.state(), i);
    if (!svc || !svc->launched) continue;
    tasks::ServiceWatch p = BuildNodeWatchPayload(*svc, 1);
    p.set_once(true);
    d.Schedule(p, NodeCheckPolicy());
  }
}

bool NodeCheckOut(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (Out(&t) && IsNodeCheck(t)) return true;
  return false;
}

void EndNodeWatches(Decision& d) {
  std::vector<std::string> out;
  for (const auto& [id, t] : d.state().tasks)
    if (t.kind == kServiceWatchTask && (t.in_flight() || t.status == TaskStatus::kRetryWait)) out.push_back(id);
  for (const auto& id : out) d.Emit(ev::kTaskAbandoned, json{{"task_id", id}, {"reason", "the service is stopping"}});
}

json NodesSummary(const RunState& s) {
  json nodes = json::array();
  for (int i = 0; i < NodeCount(s); ++i) {
    const auto svc = NodeServiceOf(s, i);
    nodes.push_back({{"node", i},
                     {"machine", NodeMachine(s, i)},
                     {"runtime_dir", svc ? json(svc->runtime_dir) : json(nullptr)},
                     {"pid", svc && svc->pid ? json(*svc->pid) : json(nullptr)},
                     {"stopped", NodeStopConfirmed(s, i)}});
  }
  return nodes;
}

bool ContinueNodeStops(Decision& d, bool force, int64_t grace_s) {
  const int n = NodeCount(d.state());
  const auto stop = [&](int i) {
    const auto svc = NodeServiceOf(d.state(), i);
    const bool escalate = StopDidNotConfirm(d.state(), i);  // the unforced one did not end it
    d.Schedule(BuildNodeStopPayload(*svc, force || escalate, grace_s));
  };
  // Every node at once: each stop ends that node's own service, and a node
  // needs nothing from another one to stop (a head whose nodes are going, or
  // a node whose head is, exits as well), so no node waits for another.
  bool out = false;
  for (int i = n - 1; i >= 0; --i) {
    if (Out(LastNodeTask(d.state(), kServiceStopTask, i)) || Out(LastNodeTask(d.state(), kServiceLaunchTask, i))) {
      out = true;
      continue;
    }
    if (NeedsStop(d.state(), i)) {
      stop(i);
      out = true;
    }
  }
  if (out) return true;
  return NodeLaunchPending(d.state());
}

std::string NodesThatMayStillRun(const RunState& s) {
  std::vector<std::string> parts;
  for (int i = 0; i < NodeCount(s); ++i) {
    const auto svc = NodeServiceOf(s, i);
    if (!svc || NodeStopConfirmed(s, i)) continue;
    parts.push_back(fmt::format("node {} ({}){}", i, svc->machine,
                                svc->pid ? fmt::format(", pid {}", *svc->pid) : std::string()));
  }
  if (parts.empty()) return "";
  return fmt::format("the service of {} may still be running", fmt::join(parts, ", "));
}

}  // namespace npuprof::sm
