// The `vllm serve` argv of a service, built from the fields of its launch
// record (the service.launch payload plus the port the launch found). Pure.
//
// The one place the argv is made: service.launch writes it into the launch
// record on the target and _serve.sh runs exactly the record's argv
// (workers/handlers/service_scripts.h); verify makes it again from the spec
// and compares the managed values of the argv that ran with it
// (statemachine/launch_audit.h).
//
//   vllm serve MODEL --host HOST --port PORT [--served-model-name NAME]
//        --tensor-parallel-size TP [--data-parallel-size DP] EXTRA...
//
// A node of a multi-node data-parallel deployment (statemachine/
// deployment_spec.h) adds vLLM's multi-node flags after --data-parallel-size:
//   --data-parallel-size-local K --data-parallel-address ADDR
//   --data-parallel-rpc-port PORT [--headless --data-parallel-start-rank R]
// and a headless node (no API server) has no --host and no --port.
//
// HOST is the record's host, else 127.0.0.1: npuprof reaches the service
// through its SSH connection at 127.0.0.1 on the target. A record written
// before the host was a spec field may carry --host among its extra args;
// then --host is left to them, as it was then. EXTRA is the kind's own
// arguments, then the user's (none of them a flag npuprof manages:
// statemachine/managed_flags.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "task_payloads.pb.h"

namespace npuprof::sm {

inline constexpr const char* kDefaultServiceHost = "127.0.0.1";

struct ServeArgvFields {
  std::string model;
  std::string served_model_name;  // "" = vLLM's default (the model path)
  std::string host;               // "" = 127.0.0.1 (or the legacy --host of the extra args)
  int64_t port = 0;
  int64_t tp = 1;
  int64_t dp = 1;
  std::vector<std::string> extra_args;
  // Set for a node of a multi-node deployment (nodes >= 2).
  std::optional<tasks::ServiceDeployment> deployment;
};

std::vector<std::string> BuildServeArgv(const ServeArgvFields& f);

// The fields of a launch payload; `port` when the payload names none (the
// port the launch found on the target).
ServeArgvFields ServeArgvFieldsOf(const tasks::ServiceLaunch& payload, int64_t port);

}  // namespace npuprof::sm
