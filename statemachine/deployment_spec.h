// Multi-node deployments in a service spec (serve, torch-profile, standalone
// memory-profile): which machines a run spans, checked and filled in at
// submit, and read back by the kinds. Pure: no I/O.
//
// Spec fields (proto/run_specs.proto, DeploymentNode):
//   nodes        [{machine, devices, role, machine_record}], 2..16 distinct
//                machines, the head first; `machine` is the head's. The
//                broker adds each node's machine_record from the inventory.
//   dp_local     data-parallel ranks per node: default dp / nodes; a shape
//                where dp_local * nodes != dp is refused, naming the numbers
//   dp_address   the head as the other nodes reach it: null = the head's
//                cluster_address (`machine add --cluster-address`), else its
//                SSH host, decided when the head is launched
//   dp_rpc_port  the head's data-parallel RPC port: null = the run's port
//                (deployment_service.h DeploymentRpcPort), checked free by
//                the head's launch before it starts anything
//
// A spec without `nodes` is the one-node form (`machine`, `devices`) and keeps
// none of these fields, so one-node runs are stored exactly as before. A spec
// naming one node is turned into the one-node form.
//
// Node i runs data-parallel ranks i*K .. i*K+K-1 (K = dp_local), each of tp
// NPUs of that node: the head with `--data-parallel-size N
// --data-parallel-size-local K --data-parallel-address A
// --data-parallel-rpc-port P`, every other node the same plus `--headless
// --data-parallel-start-rank i*K` (statemachine/deployment_args.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "task_payloads.pb.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

inline constexpr int kMaxDeploymentNodes = 16;
inline constexpr const char* kHeadRole = "head";
inline constexpr const char* kHeadlessRole = "headless";

// Checks and fills the deployment fields of spec in place; tp and dp must be
// checked already. With default_device_range, a node without devices gets
// 0..tp*dp_local-1 (memory-profile's rule) instead of null (any free ones).
// The error names the field (nodes[1].devices, dp_local, ...) and the fix.
Status ValidateDeployment(json& spec, bool default_device_range);

// Whether spec (its JSON, after validation) spans several machines.
bool IsMultiNodeSpec(const json& spec);

// One node of a run as the kinds use it: index 0 is the head.
struct DeploymentNodeInfo {
  int index = 0;
  std::string machine;
  tasks::Machine record;
  std::optional<std::vector<int64_t>> devices;  // nullopt: any free ones
  std::string role = kHeadRole;
};

// The nodes of a validated spec message (ServeSpec, TorchProfileSpec,
// MemoryProfileSpec): one entry (machine, machine_record, devices) for the
// one-node form.
template <class Spec>
std::vector<DeploymentNodeInfo> DeploymentNodes(const Spec& spec);

// Data-parallel ranks per node (dp for the one-node form).
template <class Spec>
int64_t DpLocal(const Spec& spec);

// The head's address as the other nodes reach it: dp_address, else the
// head record's cluster_address, else its host.
template <class Spec>
std::string DpAddress(const Spec& spec);

}  // namespace npuprof::sm
