// The multi-node options of `npuprof submit serve | torch-profile |
// memory-profile`: --node MACHINE[:DEVICES] (repeated, the head first),
// --dp-local, --dp-address, --dp-rpc-port. They become the spec's `nodes`,
// `dp_local`, `dp_address` and `dp_rpc_port` (statemachine/deployment_spec.h
// checks them on the server); --machine M stays the one-node form.
#pragma once

#include <string>
#include <vector>

#include "cli/submit_kinds.h"

namespace npuprof::cli {

struct DeploymentOpts {
  std::vector<std::string> nodes;  // MACHINE[:DEVICES] each
  int dp_local = 0;                // 0 = dp / nodes
  std::string dp_address;          // "" = the head's cluster address, else its host
  int dp_rpc_port = 0;             // 0 = a free port on the head
};

void AddDeploymentOptions(CLI::App* cmd, DeploymentOpts* o);

// Writes the options into spec and, when --node was given, sets c.machine to
// the head (the first --node). Returns "" or the usage error: a --node that
// is not MACHINE[:DEVICES], --machine and --node naming different heads, or
// neither given.
std::string ApplyDeployment(const DeploymentOpts& o, SubmitCommon& c, json& spec);

}  // namespace npuprof::cli
