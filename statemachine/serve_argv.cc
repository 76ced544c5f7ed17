#include "statemachine/serve_argv.h"

#include <utility>

namespace npuprof::sm {

namespace {

// A record written before --host was a spec field let the extra args bind the service.
bool ExtraArgsSetHost(const std::vector<std::string>& extra) {
  for (const std::string& a : extra)
    if (a == "--host" || a.rfind("--host=", 0) == 0) return true;
  return false;
}

}  // namespace

std::vector<std::string> BuildServeArgv(const ServeArgvFields& f) {
  std::vector<std::string> argv = {"vllm", "serve", f.model};
  const bool multi = f.deployment && f.deployment->nodes() > 1;
  const bool headless = multi && f.deployment->headless();
  const auto add = [&argv](const char* flag, std::string value) {
    argv.push_back(flag);
    argv.push_back(std::move(value));
  };
  // A headless node runs no API server: no --host, no --port.
  if (!headless) {
    if (!f.host.empty() || !ExtraArgsSetHost(f.extra_args)) add("--host", f.host.empty() ? kDefaultServiceHost : f.host);
    add("--port", std::to_string(f.port));
  }
  if (!f.served_model_name.empty()) {
    argv.push_back("--served-model-name");
    argv.push_back(f.served_model_name);
  }
  argv.push_back("--tensor-parallel-size");
  argv.push_back(std::to_string(f.tp));
  if (f.dp > 1 || multi) add("--data-parallel-size", std::to_string(f.dp));
  if (multi) {
    // vLLM's multi-node data parallelism: every node names the head's address
    // and RPC port and how many ranks it runs; a headless node also where its
    // ranks start.
    const tasks::ServiceDeployment& d = *f.deployment;
    add("--data-parallel-size-local", std::to_string(d.dp_local()));
    add("--data-parallel-address", d.dp_address());
    add("--data-parallel-rpc-port", std::to_string(d.dp_rpc_port()));
    if (headless) {
      argv.push_back("--headless");
      add("--data-parallel-start-rank", std::to_string(d.dp_start_rank()));
    }
  }
  argv.insert(argv.end(), f.extra_args.begin(), f.extra_args.end());
  return argv;
}

ServeArgvFields ServeArgvFieldsOf(const tasks::ServiceLaunch& p, int64_t port) {
  ServeArgvFields f;
  f.model = p.model();
  if (p.has_served_model_name()) f.served_model_name = p.served_model_name();
  if (p.has_host()) f.host = p.host();
  f.port = p.has_port() ? p.port() : port;
  f.tp = p.tp() > 0 ? p.tp() : 1;
  f.dp = p.dp() > 0 ? p.dp() : 1;
  f.extra_args.assign(p.extra_args().begin(), p.extra_args().end());
  if (p.has_deployment() && p.deployment().nodes() > 1) f.deployment = p.deployment();
  return f;
}

}  // namespace npuprof::sm
