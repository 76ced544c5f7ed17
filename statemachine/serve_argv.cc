#include "statemachine/serve_argv.h"

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
  if (!f.host.empty() || !ExtraArgsSetHost(f.extra_args)) {
    argv.push_back("--host");
    argv.push_back(f.host.empty() ? kDefaultServiceHost : f.host);
  }
  argv.push_back("--port");
  argv.push_back(std::to_string(f.port));
  if (!f.served_model_name.empty()) {
    argv.push_back("--served-model-name");
    argv.push_back(f.served_model_name);
  }
  argv.push_back("--tensor-parallel-size");
  argv.push_back(std::to_string(f.tp));
  if (f.dp > 1) {
    argv.push_back("--data-parallel-size");
    argv.push_back(std::to_string(f.dp));
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
  return f;
}

}  // namespace npuprof::sm
