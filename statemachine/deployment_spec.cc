#include "statemachine/deployment_spec.h"

#include <set>

#include <fmt/format.h>

#include "run_specs.pb.h"
#include "statemachine/service_spec.h"
#include "statemachine/spec_checks.h"

namespace npuprof::sm {

namespace {

bool IsHostText(const std::string& h) {
  if (h.empty() || h.size() > 253 || h[0] == '-') return false;
  for (unsigned char c : h)
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == ':' || c == '_')) return false;
  return true;
}

// The one-node form of a spec that names a single node: its machine and devices.
Status CollapseOneNode(json& spec) {
  json node = spec["nodes"][0];
  spec.erase("nodes");
  for (const char* f : {"dp_local", "dp_address", "dp_rpc_port"})
    if (spec.contains(f) && !spec[f].is_null())
      return Status::Invalid(fmt::format("{} is for deployments over several nodes; with one node leave it out", f));
  for (const char* f : {"dp_local", "dp_address", "dp_rpc_port"}) spec.erase(f);
  if (spec.contains("machine") && !spec["machine"].is_null() && spec["machine"] != node.value("machine", json()))
    return Status::Invalid(fmt::format("machine '{}' and nodes[0].machine {} differ: the first --node is the head",
                                       spec["machine"].dump(), node.value("machine", json()).dump()));
  spec["machine"] = node.value("machine", json());
  if (node.contains("machine_record")) spec["machine_record"] = node["machine_record"];
  if (node.contains("devices") && !node["devices"].is_null()) {
    if (spec.contains("devices") && !spec["devices"].is_null())
      return Status::Invalid("devices are given twice: with --node MACHINE:DEVICES leave out --devices");
    spec["devices"] = node["devices"];
  }
  return Status::Ok();
}

}  // namespace

bool IsMultiNodeSpec(const json& spec) {
  return spec.is_object() && spec.contains("nodes") && spec["nodes"].is_array() && spec["nodes"].size() > 1;
}

Status ValidateDeployment(json& spec, bool default_device_range) {
  if (!spec.contains("nodes") || spec["nodes"].is_null() || (spec["nodes"].is_array() && spec["nodes"].empty())) {
    spec.erase("nodes");
    for (const char* f : {"dp_local", "dp_address", "dp_rpc_port"})
      if (spec.contains(f) && !spec[f].is_null())
        return Status::Invalid(fmt::format(
            "{} is for deployments over several nodes: give the nodes with --node MACHINE[:DEVICES] (repeated)", f));
    for (const char* f : {"dp_local", "dp_address", "dp_rpc_port"}) spec.erase(f);
    return Status::Ok();
  }
  json& nodes = spec["nodes"];
  if (!nodes.is_array())
    return Status::Invalid("nodes must be a list of {machine, devices} (CLI: --node MACHINE[:DEVICES], repeated)");
  if (nodes.size() > kMaxDeploymentNodes)
    return Status::Invalid(fmt::format("nodes lists {} machines: a deployment spans at most {}", nodes.size(),
                                       kMaxDeploymentNodes));
  std::set<std::string> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    json& n = nodes[i];
    const std::string where = fmt::format("nodes[{}]", i);
    if (!n.is_object()) return Status::Invalid(fmt::format("{} must be an object {{machine, devices}}", where));
    if (Status s = RequireSafeName(n, "machine", true); !s.ok())
      return Status::Invalid(where + "." + s.message() + " (--node MACHINE[:DEVICES])");
    const std::string m = n["machine"];
    if (!n.contains("machine_record") || !n["machine_record"].is_object())
      return Status::Invalid(fmt::format("{}.machine: machine '{}' is not in the inventory; add it with `npuprof "
                                         "machine add {} --host ...`",
                                         where, m, m));
    if (!seen.insert(m).second)
      return Status::Invalid(fmt::format("{}.machine: machine '{}' is named twice: each node of a deployment is "
                                         "another machine (give all of a machine's NPUs in one --node M:DEVICES)",
                                         where, m));
  }
  if (nodes.size() == 1) return CollapseOneNode(spec);

  const std::string head = nodes[0]["machine"];
  if (spec.contains("machine") && !spec["machine"].is_null() && spec["machine"] != head)
    return Status::Invalid(fmt::format("machine '{}' is not nodes[0].machine '{}': the head is the first --node "
                                       "(leave out --machine with --node)",
                                       spec["machine"].is_string() ? spec["machine"].get<std::string>()
                                                                   : spec["machine"].dump(),
                                       head));
  spec["machine"] = head;
  if (nodes[0].contains("machine_record")) spec["machine_record"] = nodes[0]["machine_record"];
  if (spec.contains("devices") && !spec["devices"].is_null() &&
      !(spec["devices"].is_array() && spec["devices"].empty()))
    return Status::Invalid("devices: with several nodes give each node's devices as --node MACHINE:DEVICES");

  const int64_t n_nodes = static_cast<int64_t>(nodes.size());
  const int64_t dp = spec.value("dp", 1);
  const int64_t tp = spec.value("tp", 1);
  if (!spec.contains("dp_local") || spec["dp_local"].is_null()) {
    if (dp % n_nodes != 0)
      return Status::Invalid(fmt::format(
          "dp = {} over {} nodes does not divide: every node runs dp / nodes data-parallel ranks; use a --dp "
          "that is a multiple of {} (e.g. --dp {}), or give --dp-local",
          dp, n_nodes, n_nodes, n_nodes * std::max<int64_t>(1, dp / n_nodes)));
    spec["dp_local"] = dp / n_nodes;
  }
  if (Status s = CheckIntRange(spec, "dp_local", 1, 1, 64); !s.ok()) return s;
  const int64_t dp_local = spec["dp_local"];
  if (dp_local * n_nodes != dp)
    return Status::Invalid(fmt::format("dp_local = {} on each of {} nodes makes {} data-parallel ranks, but dp = {}: "
                                       "use --dp {} or --dp-local {}",
                                       dp_local, n_nodes, dp_local * n_nodes, dp, dp_local * n_nodes,
                                       dp % n_nodes == 0 ? dp / n_nodes : dp_local));
  if (!spec.contains("dp_address") || spec["dp_address"].is_null() || spec["dp_address"] == "") {
    spec["dp_address"] = nullptr;
  } else if (!spec["dp_address"].is_string() || !IsHostText(spec["dp_address"].get<std::string>())) {
    return Status::Invalid(fmt::format("dp_address {} is not a host name or address (--dp-address HOST: the head "
                                       "as the other nodes reach it)",
                                       spec["dp_address"].dump()));
  }
  if (!spec.contains("dp_rpc_port") || spec["dp_rpc_port"].is_null() || spec["dp_rpc_port"] == 0) {
    spec["dp_rpc_port"] = nullptr;
  } else if (Status s = CheckIntRange(spec, "dp_rpc_port", 0, 1, 65535); !s.ok()) {
    return Status::Invalid(s.message() + " (omit --dp-rpc-port to use a free port on the head)");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    json& n = nodes[i];
    const std::string where = fmt::format("nodes[{}]", i);
    if (!n.contains("devices") || n["devices"] == "") n["devices"] = nullptr;
    if (Status s = NormaliseDeviceList(n["devices"], tp * dp_local,
                                       {where + ".devices", "--node " + n["machine"].get<std::string>() + ":0,1",
                                        "tp*dp_local", "give the node without devices to pick free NPUs"});
        !s.ok())
      return s;
    if (n["devices"].is_null() && default_device_range) {
      json devs = json::array();
      for (int64_t d = 0; d < tp * dp_local; ++d) devs.push_back(d);
      n["devices"] = devs;
    }
    n["role"] = i == 0 ? kHeadRole : kHeadlessRole;
  }
  return Status::Ok();
}

namespace {

template <class Spec>
std::optional<std::vector<int64_t>> NodeDevices(const run_specs::DeploymentNode& n) {
  return SpecDevices(n.devices());
}

}  // namespace

template <class Spec>
std::vector<DeploymentNodeInfo> DeploymentNodes(const Spec& spec) {
  std::vector<DeploymentNodeInfo> out;
  if (spec.nodes_size() < 2) {
    DeploymentNodeInfo n;
    n.machine = spec.machine();
    n.record = spec.machine_record();
    n.devices = SpecDevices(spec.devices());
    out.push_back(std::move(n));
    return out;
  }
  for (int i = 0; i < spec.nodes_size(); ++i) {
    const auto& node = spec.nodes(i);
    DeploymentNodeInfo n;
    n.index = i;
    n.machine = node.machine();
    n.record = node.machine_record();
    n.devices = NodeDevices<Spec>(node);
    n.role = node.role().empty() ? (i == 0 ? kHeadRole : kHeadlessRole) : node.role();
    out.push_back(std::move(n));
  }
  return out;
}

template <class Spec>
int64_t DpLocal(const Spec& spec) {
  if (spec.nodes_size() < 2) return spec.dp();
  return spec.has_dp_local() ? spec.dp_local() : spec.dp() / spec.nodes_size();
}

template <class Spec>
std::string DpAddress(const Spec& spec) {
  if (spec.has_dp_address() && !spec.dp_address().empty()) return spec.dp_address();
  const tasks::Machine& head = spec.nodes_size() > 0 ? spec.nodes(0).machine_record() : spec.machine_record();
  return head.cluster_address().empty() ? head.host() : head.cluster_address();
}

#define NPUPROF_DEPLOYMENT_SPEC(S)                                                   \
  template std::vector<DeploymentNodeInfo> DeploymentNodes(const run_specs::S&); \
  template int64_t DpLocal(const run_specs::S&);                                 \
  template std::string DpAddress(const run_specs::S&);
NPUPROF_DEPLOYMENT_SPEC(ServeSpec)
NPUPROF_DEPLOYMENT_SPEC(TorchProfileSpec)
NPUPROF_DEPLOYMENT_SPEC(MemoryProfileSpec)
#undef NPUPROF_DEPLOYMENT_SPEC

}  // namespace npuprof::sm
