#include "cli/submit_deployment.h"

#include <fmt/format.h>

namespace npuprof::cli {

void AddDeploymentOptions(CLI::App* cmd, DeploymentOpts* o) {
  cmd->add_option("--node", o->nodes,
                  "A machine of a multi-node deployment, MACHINE or MACHINE:DEVICES (e.g. box2:0,1,2,3); repeat it "
                  "for each node, the head first (instead of --machine)")
      ->allow_extra_args(false);
  cmd->add_option("--dp-local", o->dp_local, "Data-parallel ranks per node (default: --dp divided by the nodes)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--dp-address", o->dp_address,
                  "The head's address as the other nodes reach it (default: its --cluster-address, else its host)");
  cmd->add_option("--dp-rpc-port", o->dp_rpc_port, "The head's data-parallel RPC port (default: a free port)")
      ->check(CLI::Range(1, 65535));
}

std::string ApplyDeployment(const DeploymentOpts& o, SubmitCommon& c, json& spec) {
  if (o.nodes.empty()) {
    if (o.dp_local > 0 || !o.dp_address.empty() || o.dp_rpc_port > 0)
      return "--dp-local, --dp-address and --dp-rpc-port are for deployments over several nodes: give them with "
             "--node MACHINE[:DEVICES] (repeated)";
    if (c.machine.empty()) return "--machine M is required (or --node MACHINE[:DEVICES], repeated, for a deployment "
                                  "over several machines)";
    return "";
  }
  json nodes = json::array();
  for (const std::string& n : o.nodes) {
    const auto colon = n.find(':');
    const std::string machine = n.substr(0, colon);
    if (machine.empty())
      return fmt::format("--node '{}' is not MACHINE or MACHINE:DEVICES (e.g. --node box2:0,1,2,3)", n);
    json node = {{"machine", machine}};
    if (colon != std::string::npos) {
      const std::string devices = n.substr(colon + 1);
      if (devices.empty()) return fmt::format("--node '{}' ends with ':' but names no devices (e.g. {}:0,1)", n, machine);
      node["devices"] = devices;
    }
    nodes.push_back(std::move(node));
  }
  const std::string head = nodes[0]["machine"];
  if (!c.machine.empty() && c.machine != head)
    return fmt::format("--machine {} and the first --node {} differ: with --node the first one is the head; leave "
                       "out --machine",
                       c.machine, head);
  c.machine = head;
  spec["nodes"] = std::move(nodes);
  if (o.dp_local > 0) spec["dp_local"] = o.dp_local;
  if (!o.dp_address.empty()) spec["dp_address"] = o.dp_address;
  if (o.dp_rpc_port > 0) spec["dp_rpc_port"] = o.dp_rpc_port;
  return "";
}

}  // namespace npuprof::cli
