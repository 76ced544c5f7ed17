// `npuprof submit serve --machine M --model PATH [...] [--wait] -- <extra vllm args>`
// Starts a vLLM service that runs until `npuprof stop RUN [--force]`.
// With --wait: returns once the service is ready (run summary with its
// "service" state on stdout, exit 0) or the run ended first (exit 1, reason
// on stderr).
#include <cmath>
#include <chrono>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "cli/env_option.h"
#include "cli/submit_deployment.h"
#include "cli/submit_kinds.h"
#include "statemachine/device_ids.h"
#include "statemachine/managed_flags.h"
#include "common/time_util.h"

namespace npuprof::cli {

namespace {

struct ServeOpts {
  std::string model, served_name, devices, wrap_script, host;
  int tp = 1, dp = 1, port = 0;
  int64_t health_timeout = 300, stop_grace = 10, busy_threshold = 4096, watch_poll = 10;
  double watch_hbm = 0;  // seconds, decimal (0.1..86400; the server checks it)
  std::vector<std::string> env, extra;
  bool watch_workload = false;
};

// Follows the run until its service is ready or the run has ended.
void WaitForReady(Client& client, const std::string& run_id, bool quiet) {
  auto print = [&](const json& show) {
    if (quiet) std::cout << run_id << std::endl;
    else PrintJson(show);
  };
  FollowRunEvents(client, run_id, [&](const json& batch) {
    if (batch.empty()) return false;
    auto show = client.CallJson("show", json{{"run_id", run_id}});
    if (!show.ok()) {
      Fail(2, show.status().message());
      return true;
    }
    if (show->value("state", "") == "ready") {
      print(*show);
      ExitCode() = 0;
      return true;
    }
    if (show->value("status", "running") != "running") {
      print(*show);
      Fail(1, fmt::format("serve run {} ended before the service was ready: {} {}", run_id, show->value("status", ""),
                          (*show)["error"].is_string() ? (*show)["error"].get<std::string>() : ""));
      return true;
    }
    return false;
  }, quiet);
}

}  // namespace

void AddSubmitServe(CLI::App* submit) {
  auto c = std::make_shared<SubmitCommon>();
  auto o = std::make_shared<ServeOpts>();
  auto dep = std::make_shared<DeploymentOpts>();
  auto* cmd = AddSubmitKind(submit, "serve",
                            "Start a vLLM service on a machine (or a deployment over several: --node, repeated); it "
                            "runs until `npuprof stop RUN [--force]`. Extra vLLM arguments go after --",
                            c.get(), /*machine_required=*/false);
  AddDeploymentOptions(cmd, dep.get());
  cmd->add_option("--model", o->model, "Absolute path of the model dir on the target")->required();
  cmd->add_option("--served-model-name", o->served_name, "Name the API serves (default: the model path)");
  cmd->add_option("--tp", o->tp, "Tensor parallel size")->check(CLI::Range(1, 64));
  cmd->add_option("--dp", o->dp, "Data parallel size")->check(CLI::Range(1, 64));
  cmd->add_option("--devices", o->devices, "Device indices, e.g. 0,1 (tp*dp of them; default: free NPUs)");
  cmd->add_option("--port", o->port, "Service port (default: a free port on the target)")->check(CLI::Range(1, 65535));
  cmd->add_option("--host", o->host,
                  "Address vLLM listens on: 127.0.0.1 (default), 0.0.0.0 or :: (npuprof reaches it at 127.0.0.1 "
                  "on the target)");
  cmd->add_option("--env", o->env, "Extra environment KEY=VALUE for the service (repeat --env for more)")
      ->allow_extra_args(false);
  cmd->get_option("--wait")->description(
      "Wait until the service is ready (exit 0) or the run ended first (exit 1); print the run's JSON");
  cmd->add_option("--wrap-script", o->wrap_script, "Script run as `bash WRAP _serve.sh RUNTIME_DIR`");
  cmd->add_option("--health-timeout", o->health_timeout, "Seconds to wait for readiness (default 300)");
  cmd->add_option("--stop-grace", o->stop_grace, "Seconds to wait after SIGINT and after SIGTERM (default 10)");
  cmd->add_option("--watch-poll", o->watch_poll,
                  "While ready, check every N seconds that the service is alive; a death fails the run and "
                  "releases its NPUs (default 10, 0 = never)");
  cmd->add_option("--watch-hbm", o->watch_hbm,
                  "While ready, sample the service's HBM (npu-smi) every N seconds (a decimal number, 0.1 to "
                  "86400); `show` gives the slope per device and a verdict, steady or growing (default 0 = off)");
  cmd->add_flag("--watch-workload", o->watch_workload,
                "With --watch-hbm: send a wave of 8 chat requests before every sample, so growth per request "
                "shows up");
  cmd->add_option("--busy-threshold-mb", o->busy_threshold,
                  "A device with at least this much HBM used and no process listed counts as busy");
  cmd->add_option("extra", o->extra,
                  "Extra `vllm serve` arguments (after --); none of the flags npuprof manages (the options above)");
  cmd->callback([c, o, dep] {
    // Refused here, before anything is sent: nothing is submitted.
    if (Status st = sm::CheckExtraArgs("serve", o->extra); !st.ok()) return Fail(2, st.message());
    if (!std::isfinite(o->watch_hbm))
      return Fail(2, "--watch-hbm takes a number of seconds: 0 (off) or 0.1..86400 (e.g. --watch-hbm 60)");
    json devices = nullptr;
    if (!o->devices.empty()) {
      auto ids = sm::ParseDeviceIdText(o->devices);
      if (!ids.ok()) return Fail(2, ids.status().message());
      devices = sm::DeviceIdsJson(*ids);
    }
    auto env = EnvFromFlags(o->env);
    if (!env.ok()) return Fail(2, env.status().message());
    json spec = {{"model", o->model},
                 {"tp", o->tp},
                 {"dp", o->dp},
                 {"env", *env},
                 {"extra_args", o->extra},
                 {"health_timeout_s", o->health_timeout},
                 {"watch_poll_s", o->watch_poll},
                 {"stop_grace_s", o->stop_grace},
                 {"busy_threshold_mb", o->busy_threshold}};
    // Whole seconds stay an integer in the spec; 0.5 is sent as it is, and
    // anything out of range is refused by the server, naming watch_hbm_s.
    if (o->watch_hbm != 0)
      spec["watch_hbm_s"] = o->watch_hbm == std::floor(o->watch_hbm) && std::fabs(o->watch_hbm) < 1e15
                                ? json(static_cast<int64_t>(o->watch_hbm))
                                : json(o->watch_hbm);
    if (o->watch_workload) spec["watch_workload"] = true;
    if (!o->served_name.empty()) spec["served_model_name"] = o->served_name;
    if (!devices.is_null()) spec["devices"] = devices;
    if (!o->host.empty()) spec["host"] = o->host;
    if (o->port > 0) spec["port"] = o->port;
    if (!o->wrap_script.empty()) spec["wrap_script"] = o->wrap_script;
    if (const std::string err = ApplyDeployment(*dep, *c, spec); !err.empty()) return Fail(2, err);
    if (!c->wait) return SubmitAndMaybeWait(*c, "serve", spec, false);
    // Submit without the run-to-end wait, then wait for readiness instead.
    if (!c->machine.empty()) spec["machine"] = c->machine;
    if (!c->tag.empty()) spec["tag"] = c->tag;
    json args = {{"kind", "serve"}, {"spec", spec}};
    if (!c->run_id.empty()) args["run_id"] = c->run_id;
    Client client(c->addr);
    auto r = client.CallJson("submit", args);
    if (!r.ok()) return Fail(2, r.status().message());
    const std::string run_id = r->value("run_id", "");
    if (!c->quiet)
      std::cerr << "npuprof: serve run " << run_id << " submitted; waiting for the service to be ready" << std::endl;
    WaitForReady(client, run_id, c->quiet);
  });
}

}  // namespace npuprof::cli
