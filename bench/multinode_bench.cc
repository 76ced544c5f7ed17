// Wall time of a 2-node torch-profile run against a 1-node run of the same
// per-node shape (tp 2, dp 1 per node) on simulated hosts with the reference
// table's target delays (docs/PERFORMANCE.md "Against the one-shot
// scripts": start-up 1 s, msprof export 2 s, 10 ms per request, sourcing
// set_env.sh 0.1 s). Every host is a node of its own (NpuprofHarness::AddNode:
// its own sshd, loopback address, NPUs and clock) with those delays; a
// headless node loads its weights before it joins the head
// (tests/sim/README.md "Multi-node data parallel"), so its start-up costs
// what the head's does. The nodes work in parallel, so the goal is a 2-node
// run within 10 % of the 1-node run.
//
// Runs alternate (1-node, 2-node, ...) on one installation with 2 local
// workers; each is submitted with the CLI and `--wait`. Printed per run: the
// client's wall time, the server's (RunSubmitted -> RunFinished), and with
// --spans every task's span (scheduled -> ended, ms since RunSubmitted) with
// the machine it ran on: where the time goes.
//
// On one machine every simulated host shares the same cores, which separate
// hosts would not: a 2-node run simulates twice the processes of a 1-node
// run. --core-per-host models separate hosts: each node's sshd (and so every
// process npuprof starts on that node) is pinned to a core of its own (node
// i to core i mod the cores this process may use), in the 1-node run as in
// the 2-node run; npuprof's own processes stay unpinned.
//
// Usage: npuprof_bench_multinode [--runs N] [--spans] [--core-per-host] [--json FILE]
// Figures and the exact command: docs/PERFORMANCE.md "Multi-node".
#include <sched.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/sim_bench_util.h"

namespace npuprof::bench {
namespace {

struct Options {
  int runs = 3;
  bool spans = false;
  bool core_per_host = false;
  std::string json_out;
};

Options Parse(int argc, char** argv) {
  Options o;
  CLI::App app("2-node vs 1-node torch-profile wall time, reference target delays");
  app.add_option("--runs", o.runs, "runs per shape (default 3)")->check(CLI::Range(1, 50));
  app.add_flag("--spans", o.spans, "print every task's span per run (where the time goes)");
  app.add_flag("--core-per-host", o.core_per_host,
               "pin each simulated host to a core of its own (separate hosts on one machine)");
  app.add_option("--json", o.json_out, "write the figures as JSON here");
  ParseOrExit(app, argc, argv);
  return o;
}

// The reference table's target delays, per host.
std::vector<std::string> ReferenceDelays() {
  return {"--startup-delay", "1",   "--export-delay", "2",   "--token-delay", "0", "--env-delay", "0.1",
          "--set", "delays.prefill=0.01", "--set", "delays.analyse=0", "--set", "delays.msprof_startup=0"};
}

// torch-profile with its default wave (10 requests at concurrency 5, one follow-up), tp 2 per node.
std::vector<std::string> TorchArgs(const std::vector<std::string>& where, const std::string& dp,
                                   const std::string& model, const std::string& tag) {
  std::vector<std::string> a = {"submit", "torch-profile"};
  a.insert(a.end(), where.begin(), where.end());
  a.insert(a.end(), {"--model", model, "--served-model-name", "qwen", "--tp", "2", "--dp", dp, "--tag", tag,
                     "--mode", "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "4",
                     "--prompt-tokens", "32", "--health-timeout", "60", "--wait"});
  return a;
}

// Pins the node's sshd, and with it every process later started through it,
// to the index-th core of this process's affinity set.
Status PinHost(testing::NpuprofHarness& h, const std::string& node, int index) {
  testing::SshdFixture* sshd = h.NodeSshd(node);
  if (sshd == nullptr || sshd->sshd_pid() <= 0) return Status::Internal("no sshd for node " + node);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) return Status::Internal("sched_getaffinity failed");
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) cores.push_back(c);
  if (cores.empty()) return Status::Internal("no core to pin to");
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cores[static_cast<size_t>(index) % cores.size()], &one);
  if (sched_setaffinity(sshd->sshd_pid(), sizeof(one), &one) != 0)
    return Status::Internal("sched_setaffinity of node " + node + "'s sshd failed");
  std::fprintf(stderr, "# node %s: sshd %d pinned to core %d\n", node.c_str(), static_cast<int>(sshd->sshd_pid()),
               cores[static_cast<size_t>(index) % cores.size()]);
  return Status::Ok();
}

struct Span {
  std::string kind, machine;
  int64_t start = -1, end = -1;
  json link;  // the task's recorded round trips (TaskSucceeded/TaskFailed "link"), when recorded
};

struct Row {
  std::string shape, run_id, status;
  double client_s = 0, server_s = 0;
  std::vector<Span> spans;
};

void FromEvents(const json& events, Row& row) {
  int64_t t0 = -1, t1 = -1;
  std::map<std::string, Span> by_task;
  std::vector<std::string> order;
  for (const auto& e : events) {
    const std::string type = e.value("type", "");
    const int64_t t = e.value("time_ms", int64_t{0});
    const json p = e.value("payload", json::object());
    if (type == "RunSubmitted" && t0 < 0) t0 = t;
    if (type == "RunFinished") t1 = t;
    const std::string task = p.is_object() ? p.value("task_id", "") : "";
    if (task.empty()) continue;
    if (type == "TaskScheduled" && !by_task.count(task)) {
      Span s;
      s.kind = p.value("kind", "");
      const json inner = p.value("payload", json::object());
      if (inner.is_object() && inner.contains("machine") && inner["machine"].is_object())
        s.machine = inner["machine"].value("name", "");
      s.start = t;
      by_task[task] = s;
      order.push_back(task);
    }
    if ((type == "TaskSucceeded" || type == "TaskFailed" || type == "TaskAbandoned") && by_task.count(task)) {
      by_task[task].end = t;
      if (p.contains("link") && p["link"].is_object()) by_task[task].link = p["link"];
    }
  }
  if (t0 >= 0 && t1 >= t0) row.server_s = static_cast<double>(t1 - t0) / 1000.0;
  for (const auto& id : order) {
    Span s = by_task[id];
    s.start -= t0;
    if (s.end >= 0) s.end -= t0;
    row.spans.push_back(s);
  }
}

int Main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  const std::string load_before = LoadAvg();
  testing::NpuprofHarness h;
  if (Status s = h.Start(ReferenceDelays(), 2); !s.ok()) {
    std::fprintf(stderr, "harness: %s\n", s.ToString().c_str());
    return 1;
  }
  int index = 0;
  for (const char* n : {"n0", "n1"}) {
    std::vector<std::string> args = ReferenceDelays();
    args.insert(args.end(), {"--devices", "2"});
    Status s = h.AddNode(n, args);
    if (s.ok() && opt.core_per_host) s = PinHost(h, n, index);
    if (!s.ok()) {
      std::fprintf(stderr, "node %s: %s\n", n, s.ToString().c_str());
      return 1;
    }
    ++index;
  }
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  if (model.empty()) {
    std::fprintf(stderr, "make_model failed\n");
    return 1;
  }
  std::fprintf(stderr, "# installation in %s\n", h.Dir().c_str());
  std::vector<Row> rows;
  for (int i = 0; i < opt.runs; ++i)
    for (const std::string shape : {"1-node", "2-node"}) {
      Row row;
      row.shape = shape;
      const auto where = shape == "1-node" ? std::vector<std::string>{"--machine", "n0"}
                                           : std::vector<std::string>{"--node", "n0", "--node", "n1"};
      const auto t0 = SteadyClock::now();
      testing::CliResult r = h.Cli(TorchArgs(where, shape == "1-node" ? "1" : "2", model, fmt::format("mn{}", i)), 300);
      row.client_s = SecondsSince(t0);
      const json m = r.json();
      row.run_id = m.is_object() ? m.value("run_id", "") : "";
      row.status = m.is_object() ? m.value("status", "?") : "?";
      if (row.run_id.empty()) {
        std::fprintf(stderr, "%s run %d: no run id (exit %d): %s\n", shape.c_str(), i, r.exit_code, r.err.c_str());
        return 1;
      }
      FromEvents(h.Cli({"events", row.run_id, "--json"}).json().value("events", json::array()), row);
      std::fprintf(stderr, "# %s %s: %s, client %.2f s, server %.2f s\n", shape.c_str(), row.run_id.c_str(),
                   row.status.c_str(), row.client_s, row.server_s);
      if (opt.spans)
        for (const auto& s : row.spans)
          std::fprintf(stderr, "    %7lld - %7lld ms  %-34s %-4s %s\n", static_cast<long long>(s.start),
                       static_cast<long long>(s.end), s.kind.c_str(), s.machine.c_str(),
                       s.link.is_object() ? fmt::format("rt {} link_ms {} handshakes {}",
                                                        s.link.value("round_trips", 0), s.link.value("link_ms", 0),
                                                        s.link.value("handshakes", 0))
                                                .c_str()
                                          : "");
      rows.push_back(std::move(row));
    }
  h.Stop();
  const std::string load_after = LoadAvg();

  std::map<std::string, std::vector<double>> client, server;
  bool all_ok = true;
  for (const auto& r : rows) {
    client[r.shape].push_back(r.client_s);
    server[r.shape].push_back(r.server_s);
    all_ok &= r.status == "ok";
  }
  const double one = Median(server["1-node"]), two = Median(server["2-node"]);
  const double ratio = one > 0 ? two / one : 0;
  std::printf("torch-profile, tp 2 per node, reference target delays%s; load %s -> %s\n",
              opt.core_per_host ? ", a core per simulated host" : "", load_before.c_str(), load_after.c_str());
  std::printf("%-8s %5s %12s %12s   %s\n", "shape", "runs", "server_med_s", "client_med_s", "server_s of each run");
  for (const std::string shape : {"1-node", "2-node"}) {
    std::string each;
    for (double v : server[shape]) each += fmt::format("{:.2f} ", v);
    std::printf("%-8s %5zu %12.2f %12.2f   %s\n", shape.c_str(), server[shape].size(), Median(server[shape]),
                Median(client[shape]), each.c_str());
  }
  const bool met = all_ok && ratio <= 1.10;
  std::printf("2-node / 1-node = %.3f (goal <= 1.10): %s%s\n", ratio, met ? "met" : "missed",
              all_ok ? "" : " (a run did not end ok)");
  if (!opt.json_out.empty()) {
    json out = {{"load_before", load_before}, {"load_after", load_after}, {"core_per_host", opt.core_per_host},
                {"ratio", ratio}, {"goal_met", met},
                {"runs", json::array()}};
    for (const auto& r : rows)
      out["runs"].push_back({{"shape", r.shape}, {"run_id", r.run_id}, {"status", r.status},
                             {"client_s", r.client_s}, {"server_s", r.server_s}});
    std::ofstream(opt.json_out) << out.dump(2) << "\n";
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
