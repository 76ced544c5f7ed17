// Scale: N concurrent light runs (probe: one npu-smi over SSH each) against T
// simulated targets behind one loopback sshd, for several N (default 20 and
// 200 over 20 targets). Each N gets a fresh installation (NpuprofHarness with
// 2 local workers, the server's default capacity), simulated delays at zero.
//
// Per N it reports: runs per minute (first submit -> every run terminal, as
// seen by polling `npuprof runs --json`), the broker's memory (VmRSS of the
// `npuprof server` process before, after; VmHWM = peak), the local workers'
// VmRSS, the event store's size (`du` of DATA_DIR/store, allocated and
// apparent) and its growth per run, and SSH handshakes per worker.
//
// Usage: npuprof_bench_scale [--targets T] [--runs 20,200] [--submitters K] [--json FILE]
// Figures and their meaning: docs/PERFORMANCE.md, "Scale".
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/sim_bench_util.h"

namespace npuprof::bench {
namespace {

struct Options {
  int targets = 20;
  std::vector<int> runs = {20, 200};
  int submitters = 4;  // client processes submitting at once
  std::string json_out;
};

Options Parse(int argc, char** argv) {
  Options o;
  CLI::App app{"npuprof scale benchmark: concurrent probe runs over simulated targets (docs/PERFORMANCE.md)"};
  app.add_option("--targets", o.targets, "simulated targets")->check(CLI::Range(1, 1000000));
  app.add_option("--runs", o.runs, "concurrent runs per step, comma-separated")->delimiter(',')->check(CLI::Range(1, 1000000));
  app.add_option("--submitters", o.submitters, "client processes submitting at once")->check(CLI::Range(1, 1000000));
  app.add_option("--json", o.json_out, "write the results as JSON to this file");
  ParseOrExit(app, argc, argv);
  return o;
}

std::string Machine(int i) { return fmt::format("sim{}", i + 1); }

json OneScale(int n_runs, const Options& opt) {
  json r = {{"runs", n_runs}, {"targets", opt.targets}, {"load_before", LoadAvg()}};
  testing::NpuprofHarness h;
  if (Status s = h.Start(ZeroDelaySimArgs(), 2); !s.ok()) {
    r["error"] = s.ToString();
    return r;
  }
  for (int t = 1; t < opt.targets; ++t) {
    if (Status s = h.AddTarget(Machine(t), ZeroDelaySimArgs()); !s.ok()) {
      r["error"] = s.ToString();
      return r;
    }
  }
  const pid_t server = h.server_pid();
  const std::string store = h.DataDir() + "/store";
  const int64_t rss0 = ProcStatusKb(server, "VmRSS");
  const DirSize du0 = SizeOfDir(store);

  // Submit: K client processes at once, runs spread round-robin over the targets.
  std::atomic<int> next{0}, failed_submits{0};
  const auto t0 = SteadyClock::now();
  std::vector<std::thread> subs;
  for (int k = 0; k < opt.submitters; ++k) {
    subs.emplace_back([&] {
      for (int i; (i = next++) < n_runs;) {
        testing::CliResult c = h.Cli({"submit", "probe", "--machine", Machine(i % opt.targets)}, 60);
        if (c.exit_code != 0) ++failed_submits;
      }
    });
  }
  for (auto& t : subs) t.join();
  const double submit_s = SecondsSince(t0);

  // Wait until every run is terminal.
  int done = 0, ok = 0;
  int64_t rss_peak_seen = 0;
  while (SecondsSince(t0) < 600) {
    rss_peak_seen = std::max(rss_peak_seen, ProcStatusKb(server, "VmRSS"));
    const json runs = h.Cli({"runs", "--json", "--kind", "probe"}, 30).json().value("runs", json::array());
    done = ok = 0;
    for (const auto& row : runs) {
      if (row.value("terminal", false)) ++done;
      if (row.value("status", "") == "ok") ++ok;
    }
    if (done >= n_runs - failed_submits) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  const double wall_s = SecondsSince(t0);
  const int64_t rss1 = ProcStatusKb(server, "VmRSS");
  const int64_t hwm = ProcStatusKb(server, "VmHWM");
  int64_t worker_rss = 0;
  for (pid_t w : h.WorkerPids()) worker_rss += std::max<int64_t>(0, ProcStatusKb(w, "VmRSS"));
  const DirSize du1 = SizeOfDir(store);
  const auto lines = ReadTaskStats(h.Dir() + "/server.log");
  int64_t handshakes = 0, sessions = 0, execs = 0;
  for (const auto& f : lines) execs += Num(f, "exec");
  const auto workers = WorkerHandshakes(lines);
  for (const auto& [pid, v] : workers) {
    handshakes += v.first;
    sessions += v.second;
  }
  r.update({{"submit_failures", failed_submits.load()}, {"finished", done}, {"ok", ok}, {"submit_s", submit_s},
            {"wall_s", wall_s}, {"runs_per_min", wall_s > 0 ? done * 60.0 / wall_s : 0},
            {"broker_rss_kb_before", rss0}, {"broker_rss_kb_after", rss1},
            {"broker_rss_kb_peak_polled", rss_peak_seen}, {"broker_hwm_kb", hwm},
            {"workers_rss_kb", worker_rss}, {"store_du_before", du0.allocated},
            {"store_du_after", du1.allocated}, {"store_apparent_before", du0.apparent},
            {"store_apparent_after", du1.apparent},
            {"store_du_per_run", done > 0 ? static_cast<double>(du1.allocated - du0.allocated) / done : 0},
            {"store_apparent_per_run", done > 0 ? static_cast<double>(du1.apparent - du0.apparent) / done : 0},
            {"ssh_handshakes", handshakes}, {"worker_sessions", sessions}, {"exec", execs},
            {"load_after", LoadAvg()}});
  h.Stop();
  return r;
}

int Main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  json all = json::array();
  for (int n : opt.runs) {
    std::fprintf(stderr, "# scale: %d probe runs over %d targets ...\n", n, opt.targets);
    all.push_back(OneScale(n, opt));
    std::fprintf(stderr, "# %s\n", all.back().dump().c_str());
  }
  std::printf("scale: probe runs over %d simulated targets (one sshd), 2 local workers, delays 0\n", opt.targets);
  std::printf("%5s %5s %6s %8s %8s %9s %10s %10s %10s %9s %11s %11s %10s %4s %8s %s\n", "runs", "ok", "failed",
              "submit_s", "wall_s", "runs/min", "rss_before", "rss_after", "rss_peak", "workers", "store_du",
              "du_per_run", "app_per_run", "hs", "sessions", "load");
  for (const auto& r : all) {
    if (r.contains("error")) {
      std::printf("%5d error: %s\n", r.value("runs", 0), r.value("error", "").c_str());
      continue;
    }
    std::printf("%5d %5d %6d %8.1f %8.1f %9.1f %10s %10s %10s %9s %11s %11s %10s %4lld %8lld %s -> %s\n",
                r.value("runs", 0), r.value("ok", 0),
                r.value("finished", 0) - r.value("ok", 0) + r.value("submit_failures", 0),
                r.value("submit_s", 0.0), r.value("wall_s", 0.0), r.value("runs_per_min", 0.0),
                HumanBytes(r.value("broker_rss_kb_before", 0) * 1024.0).c_str(),
                HumanBytes(r.value("broker_rss_kb_after", 0) * 1024.0).c_str(),
                HumanBytes(r.value("broker_hwm_kb", 0) * 1024.0).c_str(),
                HumanBytes(r.value("workers_rss_kb", 0) * 1024.0).c_str(),
                HumanBytes(static_cast<double>(r.value("store_du_after", int64_t{0}))).c_str(),
                HumanBytes(r.value("store_du_per_run", 0.0)).c_str(),
                HumanBytes(r.value("store_apparent_per_run", 0.0)).c_str(),
                static_cast<long long>(r.value("ssh_handshakes", int64_t{0})),
                static_cast<long long>(r.value("worker_sessions", int64_t{0})), r.value("load_before", "").c_str(),
                r.value("load_after", "").c_str());
  }
  if (!opt.json_out.empty()) std::ofstream(opt.json_out) << all.dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
