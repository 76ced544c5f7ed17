// `npuprof worker --broker ENDPOINT`: a worker process serving every task kind.
#include <csignal>

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "workers/handlers/handlers.h"
#include "workers/worker_runtime.h"

namespace npuprof::cli {

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

void AddWorkerCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("worker", "Run a worker that executes tasks for a broker");
  auto opts = std::make_shared<workers::WorkerOptions>();
  auto addr = std::make_shared<ServerAddress>();
  AddServerOptions(cmd, addr.get());
  cmd->add_option("--capacity", opts->capacity, "Tasks run at once")->check(CLI::Range(1, 256));
  cmd->add_option("--id", opts->worker_id, "Worker id (default host-pid)");
  cmd->callback([opts, addr] {
    opts->broker_endpoint = ResolveEndpoint(*addr);
    auto keys = ResolvePeerKeys(*addr, opts->broker_endpoint);
    if (!keys.ok()) return Fail(2, keys.status().message());
    opts->curve = *keys;
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    std::signal(SIGPIPE, SIG_IGN);
    workers::WorkerRuntime rt(*opts);
    workers::RegisterDefaultHandlers(rt);
    spdlog::info("worker connecting to {}{}", opts->broker_endpoint,
                 opts->curve ? " with CURVE key " + opts->curve->own.public_key : std::string());
    Status st = rt.Run(g_stop);
    if (!st.ok()) Fail(2, st.ToString());
  });
}

}  // namespace npuprof::cli
