// `npuprof server`: broker + store, and by default local worker processes
// that it supervises (restarted when they die).
#include <signal.h>
#include <csignal>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "broker/listen_endpoint.h"
#include "broker/metrics.h"
#include "broker/metrics_http.h"
#include "cli/commands.h"
#include "proto/wire.h"

namespace npuprof::cli {

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "npuprof";
  buf[n] = 0;
  return buf;
}

pid_t SpawnWorker(const std::string& endpoint, int capacity, int index) {
  const std::string exe = SelfExe();
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: dies with the server, so a killed server leaves no stray workers.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  // A local worker uses the data dir's local key (found from its ipc
  // endpoint), never keys meant for this server's own remote connections.
  unsetenv("NPUPROF_KEY_FILE");
  unsetenv("NPUPROF_SERVER_KEY");
  const std::string cap = std::to_string(capacity);
  const std::string id = fmt::format("local-{}-{}", parent, index);
  execl(exe.c_str(), exe.c_str(), "worker", "--broker", endpoint.c_str(), "--capacity", cap.c_str(), "--id",
        id.c_str(), static_cast<char*>(nullptr));
  _exit(127);
}

}  // namespace

void AddServerCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("server", "Run the broker with its event store (and local workers)");
  struct Opts {
    std::string data_dir;
    std::vector<std::string> listen;
    bool no_local_workers = false;
    int local_workers = 2;
    int worker_capacity = 8;
    bool no_sync = false;
    std::string metrics_listen;
    bool metrics_allow_remote = false;
    uint64_t min_free_mb = 64;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--data-dir", o->data_dir, "Where the store and the socket live (env NPUPROF_DATA_DIR)");
  cmd->add_option("--listen", o->listen,
                  "Extra endpoint to listen on, e.g. tcp://127.0.0.1:5555; turns on CURVE: only peers on the "
                  "allow-list (`npuprof keys allow`) get in (docs/SECURITY.md)");
  cmd->add_flag("--no-local-workers", o->no_local_workers, "Start no worker processes (remote workers join)");
  cmd->add_option("--local-workers", o->local_workers, "Local worker processes")->check(CLI::Range(0, 64));
  cmd->add_option("--worker-capacity", o->worker_capacity, "Tasks per local worker")->check(CLI::Range(1, 256));
  cmd->add_flag("--no-sync", o->no_sync, "Do not fsync commits (benchmarks only: loses durability)");
  cmd->add_option("--metrics-listen", o->metrics_listen,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics, e.g. 127.0.0.1:9464 (unauthenticated, "
                  "read-only; default off; loopback only unless --metrics-allow-remote; env NPUPROF_METRICS_LISTEN)");
  cmd->add_option("--min-free-mb", o->min_free_mb,
                  "Space kept free under the data dir (MB): below it new work is refused and evidence that does "
                  "not fit fails its task, naming the space; runs under way record their progress down to half "
                  "of it (default 64; 0 = no check)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 30));
  cmd->add_flag("--metrics-allow-remote", o->metrics_allow_remote,
                "Let --metrics-listen bind an address beyond loopback (anyone who reaches it reads the metrics)");
  cmd->callback([o] {
    broker::BrokerOptions bo;
    bo.data_dir = ResolveDataDir(o->data_dir);
    bo.endpoints = o->listen;
    // Refused before anything starts (Broker::Open checks them again).
    for (const auto& ep : bo.endpoints)
      if (Status st = broker::CheckListenEndpoint(ep); !st.ok()) return Fail(2, st.message());
    bo.sync = !o->no_sync;
    bo.min_free_bytes = o->min_free_mb << 20;
    if (const char* k = std::getenv("NPUPROF_FAULT_CRASH_AFTER_GLOBAL_POS")) bo.faults.crash_after_global_pos = std::strtoull(k, nullptr, 10);
    if (const char* k = std::getenv("NPUPROF_FAULT_CRASH_BEFORE_DISPATCH")) bo.faults.crash_before_dispatch_kind = k;
    std::string metrics_listen = o->metrics_listen;
    if (const char* m = std::getenv("NPUPROF_METRICS_LISTEN"); m && metrics_listen.empty()) metrics_listen = m;
    std::optional<metrics::ListenAddress> metrics_at;
    if (!metrics_listen.empty()) {
      auto parsed = metrics::ParseListenAddress(metrics_listen);
      if (!parsed.ok()) return Fail(2, parsed.status().message());
      metrics_at = *parsed;
    }
    // Declared before the broker, which points to it, and the responder, which renders it.
    broker::BrokerMetrics broker_metrics;
    if (metrics_at) bo.metrics = &broker_metrics;
    std::signal(SIGINT, OnSignal);
    std::signal(SIGTERM, OnSignal);
    std::signal(SIGPIPE, SIG_IGN);
    std::unique_ptr<metrics::MetricsHttpServer> metrics_http;
    // Started (or refused: a non-loopback address without --metrics-allow-remote) before the
    // broker opens the store, so a refused address leaves nothing behind.
    if (metrics_at) {
      metrics::MetricsHttpServer::Options http_options;
      http_options.allow_non_loopback = o->metrics_allow_remote;
      auto started = metrics::MetricsHttpServer::Start(*metrics_at, [&broker_metrics, store = bo.data_dir + "/store"] {
        metrics::ScrapeReadings r;
        r.process = metrics::ReadProcessReadings();
        if (auto bytes = metrics::DirectoryBytes(store)) r.store_size_bytes = static_cast<double>(*bytes);
        return broker_metrics.Render(r);
      }, http_options);
      if (!started.ok()) return Fail(2, started.status().message());
      metrics_http = std::move(started).value();
      spdlog::info("metrics at http://{}/metrics", metrics_http->address());
    }
    auto broker = broker::Broker::Open(bo);
    if (!broker.ok()) return Fail(2, broker.status().ToString());
    {
      std::ofstream(bo.data_dir + "/server.pid") << getpid() << "\n";
    }
    spdlog::info("npuprof server pid {} data dir {} listening on {}", getpid(), bo.data_dir,
                 fmt::join((*broker)->endpoints(), ", "));
    const int n = o->no_local_workers ? 0 : o->local_workers;
    const std::string endpoint = wire::IpcEndpointFor(bo.data_dir);
    std::thread supervisor([n, endpoint, cap = o->worker_capacity] {
      std::map<pid_t, int> children;
      for (int i = 0; i < n; ++i) children[SpawnWorker(endpoint, cap, i)] = i;
      while (!g_stop) {
        int status = 0;
        pid_t dead = waitpid(-1, &status, WNOHANG);
        if (dead > 0 && children.count(dead)) {
          const int idx = children[dead];
          children.erase(dead);
          spdlog::warn("local worker {} (pid {}) exited ({}); starting a new one", idx, dead,
                       WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status))
                                           : fmt::format("status {}", WEXITSTATUS(status)));
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          if (!g_stop) children[SpawnWorker(endpoint, cap, idx)] = idx;
          continue;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      for (const auto& [pid, idx] : children) kill(pid, SIGTERM);
      for (const auto& [pid, idx] : children) waitpid(pid, nullptr, 0);
    });
    Status st = (*broker)->Run(g_stop);
    g_stop = true;
    supervisor.join();
    if (!st.ok()) Fail(2, st.ToString());
  });
}

}  // namespace npuprof::cli
