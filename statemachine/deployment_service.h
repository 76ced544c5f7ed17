// The service of a multi-node deployment, node by node: each node's launch
// payload, which node a service task belongs to, and what is known of each
// node's service. Pure (no I/O); shared by serve, torch-profile and
// memory-profile.
//
// A one-node run is node 0 and its tasks are built exactly as before. In a
// multi-node run every node's tasks go to that node's machine (the payload's
// `machine`), so the machine a task was sent to names its node; node i's
// runtime dir is `<its runtime_base>/<run_id>/service-<n>-node<i>`, so two
// nodes never share a runtime dir or a service marker even on one host.
//
// Lifecycle across nodes (docs/MULTINODE.md): every node is launched at once,
// each told the head's address and the data-parallel RPC port (the spec's,
// else one npuprof chooses for the run, DeploymentRpcPort; the head's launch
// refuses it, starting nothing, when it is not free there); ready means the head's API answers (vLLM's front
// end waits for every engine to join) while every node's process group is
// watched; a node that dies fails the run naming it; the stop goes to every
// node at once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "task_payloads.pb.h"
#include "task_results.pb.h"
#include "statemachine/deployment_spec.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

// How many nodes the run's spec names (1 for the one-node form).
int NodeCount(const RunState& s);

// The index of the node a task was sent to: the position of its payload's
// machine among the spec's nodes; 0 for a one-node run (or a machine the
// spec does not name).
int NodeOfTask(const RunState& s, const TaskInfo& task);

// The machine name of node i ("" when there is no such node).
std::string NodeMachine(const RunState& s, int node);

// The latest task of `kind` sent to node i (nullptr when none).
const TaskInfo* LastNodeTask(const RunState& s, std::string_view kind, int node);

// "<runtime_base>/<run_id>/service-<launch_no>-node<i>": node i's runtime dir.
std::string NodeRuntimeDir(const tasks::Machine& record, const std::string& run_id, int launch_no, int node);

// The data-parallel RPC port of a multi-node run: the spec's dp_rpc_port,
// else one chosen from the run id and the head's SSH endpoint as the spec
// recorded them (FNV-1a of "<run_id>@<user>@<host>:<port>": fixed for the
// run, so a recovered run tells its nodes the same port; two installations
// that reuse a run id against one host, as tests do, still differ) in
// [kRpcPortFirst, kRpcPortLast],
// below Linux's ephemeral range (32768..60999, where the kernel hands out
// client ports and the API port is picked) and clear of 29500..29599 (the
// torch and vLLM distributed defaults). The head's launch checks that it is
// free before anything starts; a run whose port is taken fails naming it
// and `--dp-rpc-port`. Knowing it up front lets every node launch at once.
inline constexpr int32_t kRpcPortFirst = 20000;
inline constexpr int32_t kRpcPortLast = 29499;
int32_t RunRpcPort(const std::string& key);
template <class Spec>
int32_t DeploymentRpcPort(const Spec& spec, const std::string& run_id);

// The service.launch payload of node i of a multi-node spec: the one-node
// payload (BuildLaunchPayload) sent to node i's machine, with its devices,
// its runtime dir and its place in the deployment. The head keeps the
// spec's port; every node gets dp_rpc_port = the spec's, else `rpc_port`
// (the head without either picks a free one in its launch: how runs
// launched head-first, before every node launched at once, went on); a
// headless node gets no API port.
template <class Spec>
tasks::ServiceLaunch BuildNodeLaunchPayload(const std::string& run_id, int launch_no, const Spec& spec, int node,
                                            std::optional<int32_t> rpc_port,
                                            const std::vector<std::string>& kind_args = {},
                                            const json& kind_env = json::object());

// What is known of node i's service from its last service.launch: nullopt
// when it was never launched or its launch started nothing for sure.
struct NodeService {
  int node = 0;
  std::string machine;
  tasks::Machine record;  // unset for a one-node run (the run's machine)
  std::string runtime_dir;
  std::optional<int64_t> pid;   // unknown: service.stop reads <runtime>/pid
  std::optional<int64_t> port;  // the API port (the head's)
  std::optional<int32_t> rpc_port;  // the head's data-parallel RPC port
  bool launched = false;        // the launch succeeded (else it failed and may have started something)
};
std::optional<NodeService> NodeServiceOf(const RunState& s, int node);

// Whether node i's last service.stop confirmed its service stopped, gone or
// never started.
bool NodeStopConfirmed(const RunState& s, int node);

// The nodes whose vLLM had already exited when the stop came (their last
// service.stop answered already_gone), each with the last line its stderr
// left: "node 1 (worker) had exited before the stop: RuntimeError: ...".
// Empty when none had. What a failed run's error adds, so that a node lost
// mid-run is named even when the step that failed was the head's.
std::vector<std::string> NodesGoneBeforeTheStop(const RunState& s);

// The service.stop payload for node i (sent to its machine).
tasks::ServiceStop BuildNodeStopPayload(const NodeService& svc, bool force, int64_t grace_s);

// The service.watch payload for node i (sent to its machine).
tasks::ServiceWatch BuildNodeWatchPayload(const NodeService& svc, int64_t poll_s);

class Decision;

// Builds node i's launch payload, given the head's data-parallel RPC port.
using NodeLaunchBuilder = std::function<tasks::ServiceLaunch(int node, std::optional<int32_t> rpc_port)>;

// Launches every node at once (the run's start), each with the deployment's
// RPC port (DeploymentRpcPort).
void LaunchAllNodes(Decision& d, int32_t rpc_port, const NodeLaunchBuilder& build);
// Once the head's launch succeeded: launches every other node not launched
// yet, with the RPC port the head's launch recorded (or none: the payload's
// own). A no-op when every node was launched at once.
void LaunchHeadlessNodes(Decision& d, const results::ServiceLaunchResult& head, const NodeLaunchBuilder& build);
// Whether every node's last launch succeeded.
bool AllNodesLaunched(const RunState& s);
// Whether some node's launch is still on its way (pending or waiting to retry).
bool NodeLaunchPending(const RunState& s);
// Watches the process groups of nodes first.. (a watch answers only when its
// service died, or when cancelled); a node already watched is skipped.
void WatchNodes(Decision& d, int first, int64_t poll_s);
// Abandons every node watch still out (the deployment is stopping: a node
// that exits now is no death to report).
void EndNodeWatches(Decision& d);
// A one-off liveness check of each launched node first..: a service.watch
// with `once`, answering at its first poll (success: alive; failure
// service_died: gone, and the run names the node as for a watch). One round
// trip per node, all at once: what proves a node alive after a step that did
// not need it (memory-profile's inference may be served by the head alone).
void CheckNodesAlive(Decision& d, int first);
// Whether a node's liveness check is still out (pending or retrying).
bool NodeCheckOut(const RunState& s);
// Whether a service.watch task is a one-off liveness check.
bool IsNodeCheck(const TaskInfo& t);

// The stop of a multi-node deployment, one step: stops every node at once
// (the head with the headless ones), each once its launch has answered; a node whose stop failed unforced is stopped again with force.
// Returns true while a stop or a launch is still out (call it again on each
// answer), false when every node is settled: stopped, never started, or its
// forced stop failed (it may still run: NodesThatMayStillRun says so).
bool ContinueNodeStops(Decision& d, bool force, int64_t grace_s);
// Every node's service as a summary shows it: [{node, machine, runtime_dir,
// pid, stopped}] (null where a node has no service record yet).
json NodesSummary(const RunState& s);
// The nodes whose service may still run, as one sentence ("" = none).
std::string NodesThatMayStillRun(const RunState& s);

}  // namespace npuprof::sm
