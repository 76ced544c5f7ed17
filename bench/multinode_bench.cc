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
// the 2-node run; npuprof's own processes stay unpinned. That is only half
// of separate hosts: npuprof's server, workers and CLI still share the two
// cores with the hosts, and in the 2-node shape both cores are some host's,
// so npuprof competes with both hosts where in the 1-node shape it had a
// core to itself.
//
// --cgroup-cpu models separate machines of fixed speed instead (cgroup v1's
// cpu controller, bench/cpu_cgroups.h; root): each simulated host's sshd,
// and so every process npuprof starts on that host, goes into a group of
// its own capped at --host-cpu of a core (default 0.75), and this bench
// process, with the npuprof server, its workers and every CLI call it
// starts, into one capped at --npuprof-cpu (default 0.5): 0.75 + 0.75 +
// 0.5 = the 2 cores of the machine the figures were taken on. The caps are
// the same in both shapes, so the 1-node run's host is no faster than each
// of the 2-node run's hosts and npuprof has the same CPU in both: what the
// ratio then measures is how much of the two nodes' work runs in parallel,
// not how many cores this machine has. What it does not model: a network
// between the machines (loopback), processes outside the groups (another
// user's load takes CPU from every group; a cap is a ceiling, not a
// guarantee), and a host's cap is for all its processes together (a real
// host has many cores; here the simulated service, its ranks and analyses
// share 0.75 of one, as they shared one pinned core with --core-per-host).
// While the machine is contended the groups together weigh as 64 busy
// processes (cpu.shares), so a build beside the bench takes little of the
// caps; the caps add up to the 2 cores, so the groups never take more.
// With --npuprof-cpu none npuprof's group is accounted and weighted but
// not capped: the model where npuprof's host is a machine of its own (its
// CPU is not what the hosts' runs wait for) and only the hosts are of fixed
// speed; npuprof then takes what the hosts leave of the 2 cores (0.5 when
// both hosts are at their caps, up to 1.25 beside one). Run 53 reports both.
// Refused with a message when the cgroup v1 mounts are missing or not
// writable. --cpu-usage puts the same groups in place in the cpuacct
// hierarchy only (no caps, no change to scheduling): the CPU time of each
// group per run, printed with every run; with --core-per-host it shows
// what the old model's runs cost each host and npuprof. With either, each
// run prints each group's CPU seconds and how often and how long it was
// throttled at its cap (cpu.stat nr_throttled, throttled_time, summed over
// the cores), and the summary the medians per shape.
//
// After every series: each step's span per shape (medians over the warm
// runs, "kind machine #k"), and the difference of their lengths: where the
// 2-node run's extra time goes, step by step.
//
// Usage: npuprof_bench_multinode [--runs N] [--spans] [--core-per-host]
//          [--cgroup-cpu [--host-cpu 0.75] [--npuprof-cpu 0.5|none]] [--cpu-usage] [--json FILE]
// Figures and the exact command: docs/PERFORMANCE.md "Multi-node".
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/cpu_cgroups.h"
#include "bench/sim_bench_util.h"

namespace npuprof::bench {
namespace {

struct Options {
  int runs = 3;
  bool spans = false;
  bool core_per_host = false;
  bool cgroup_cpu = false;
  bool cpu_usage = false;
  std::string host_cpu = "0.75", npuprof_cpu = "0.5";
  std::string json_out;
};

Options Parse(int argc, char** argv) {
  Options o;
  CLI::App app("2-node vs 1-node torch-profile wall time, reference target delays");
  app.add_option("--runs", o.runs, "runs per shape (default 3)")->check(CLI::Range(1, 50));
  app.add_flag("--spans", o.spans, "print every task's span per run (where the time goes)");
  app.add_flag("--core-per-host", o.core_per_host,
               "pin each simulated host to a core of its own (separate hosts on one machine)");
  app.add_flag("--cgroup-cpu", o.cgroup_cpu,
               "cap each simulated host and npuprof at a fixed CPU share (cgroup v1, root): separate machines");
  app.add_option("--host-cpu", o.host_cpu, "with --cgroup-cpu: each host's cap in cores (default 0.75)");
  app.add_option("--npuprof-cpu", o.npuprof_cpu,
                 "with --cgroup-cpu: npuprof's cap in cores (default 0.5), or none: accounted, weighted, not capped");
  app.add_flag("--cpu-usage", o.cpu_usage, "account each host's and npuprof's CPU per run (cgroups, no caps)");
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
  std::map<std::string, CpuUsage> cpu;  // per group ("npuprof", "n0", "n1"): what the run cost
};

const std::vector<std::string> kGroups = {"npuprof", "n0", "n1"};
constexpr int64_t kCappedShares = 64 * 1024;

std::map<std::string, CpuUsage> ReadUsage(const CpuCgroups* g) {
  std::map<std::string, CpuUsage> out;
  if (!g) return out;
  for (const auto& name : kGroups)
    if (auto u = g->Usage(name); u.ok()) out[name] = *u;
  return out;
}

std::string UsageLine(const std::map<std::string, CpuUsage>& cpu) {
  std::string out;
  for (const auto& [name, u] : cpu)
    out += fmt::format(" {} cpu {:.2f} s (throttled {} times, {:.2f} s)", name, static_cast<double>(u.cpu_ns) / 1e9,
                       u.nr_throttled, static_cast<double>(u.throttled_ns) / 1e9);
  return out;
}

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

// Each step's span per shape (medians over the warm runs: every run but
// each shape's first when there are more): "kind machine #k" is the k-th
// task of that kind on that machine in a run. Where the 2-node run's extra
// time goes, step by step (run 53).
void PrintSteps(const std::vector<Row>& rows) {
  struct Acc {
    std::vector<double> start, len, end;
  };
  std::map<std::string, std::map<std::string, Acc>> by;  // step -> shape -> spans
  std::map<std::string, int64_t> first_start;            // step -> earliest start (the table's order)
  std::map<std::string, int> seen;                       // shape -> runs seen
  for (const auto& r : rows) {
    const int n = seen[r.shape]++;
    if (n == 0 && rows.size() > 2) continue;  // the shape's first run is cold
    std::map<std::string, int> k;
    for (const auto& sp : r.spans) {
      if (sp.end < 0) continue;
      const std::string key = fmt::format("{} {} #{}", sp.kind, sp.machine, k[sp.kind + " " + sp.machine]++);
      Acc& a = by[key][r.shape];
      a.start.push_back(static_cast<double>(sp.start));
      a.end.push_back(static_cast<double>(sp.end));
      a.len.push_back(static_cast<double>(sp.end - sp.start));
      auto it = first_start.find(key);
      if (it == first_start.end() || sp.start < it->second) first_start[key] = sp.start;
    }
  }
  std::vector<std::pair<int64_t, std::string>> order;
  for (const auto& [key, t] : first_start) order.push_back({t, key});
  std::sort(order.begin(), order.end());
  std::printf("step spans, ms (medians of the warm runs: start - end, length)\n%-44s %22s %22s %8s\n", "step",
              "1-node", "2-node", "len +/-");
  for (const auto& [t, key] : order) {
    std::string cell[2];
    double len[2] = {-1, -1};
    int i = 0;
    for (const std::string shape : {"1-node", "2-node"}) {
      auto it = by[key].find(shape);
      if (it != by[key].end()) {
        len[i] = Median(it->second.len);
        cell[i] = fmt::format("{:.0f}-{:.0f} {:.0f}", Median(it->second.start), Median(it->second.end), len[i]);
      }
      ++i;
    }
    std::printf("%-44s %22s %22s %8s\n", key.c_str(), cell[0].c_str(), cell[1].c_str(),
                len[0] >= 0 && len[1] >= 0 ? fmt::format("{:+.0f}", len[1] - len[0]).c_str() : "");
  }
}

int Main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  // The groups outlive the harness (declared first): their destructor moves
  // what is left in them back to the root group and removes them.
  std::unique_ptr<CpuCgroups> groups;
  if (opt.cgroup_cpu || opt.cpu_usage) {
    double host = 0, mine = 0;  // 0: accounting only
    if (opt.cgroup_cpu) {
      auto h = ParseCpus(opt.host_cpu, "--host-cpu");
      auto n = opt.npuprof_cpu == "none" ? Result<double>(0.0) : ParseCpus(opt.npuprof_cpu, "--npuprof-cpu");
      if (!h.ok() || !n.ok()) {
        std::fprintf(stderr, "%s\n", (!h.ok() ? h.status() : n.status()).message().c_str());
        return 2;
      }
      host = *h;
      mine = *n;
    }
    auto g = CpuCgroups::Create(opt.cgroup_cpu);
    if (!g.ok()) {
      std::fprintf(stderr, "--cgroup-cpu/--cpu-usage refused: %s\n", g.status().message().c_str());
      return 2;
    }
    groups = std::move(g).value();
    // With caps: the groups weigh 64 processes of the root group while the
    // machine is contended, so another user's load (a build) does not take
    // their caps from them (the caps keep them from taking more than 2 cores).
    if (opt.cgroup_cpu)
      if (Status s = groups->Prioritise(kCappedShares); !s.ok()) {
        std::fprintf(stderr, "cgroup shares: %s\n", s.ToString().c_str());
        return 2;
      }
    for (const auto& name : kGroups)
      if (Status s = groups->AddGroup(name, name == "npuprof" ? mine : host); !s.ok()) {
        std::fprintf(stderr, "cgroup %s: %s\n", name.c_str(), s.ToString().c_str());
        return 2;
      }
    // This process first: the server, its workers and every CLI call start from it.
    if (Status s = groups->Move("npuprof", ::getpid()); !s.ok()) {
      std::fprintf(stderr, "cgroup npuprof: %s\n", s.ToString().c_str());
      return 2;
    }
    std::fprintf(stderr, "# cgroups under %s: hosts %s, npuprof %s\n", groups->CpuDir("").c_str(),
                 opt.cgroup_cpu ? opt.host_cpu.c_str() : "uncapped", opt.cgroup_cpu ? opt.npuprof_cpu.c_str() : "uncapped");
  }
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
    if (s.ok() && groups) {
      testing::SshdFixture* sshd = h.NodeSshd(n);
      s = sshd ? groups->Move(n, sshd->sshd_pid()) : Status::Internal(std::string("no sshd for node ") + n);
    }
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
      const auto cpu0 = ReadUsage(groups.get());
      const auto t0 = SteadyClock::now();
      testing::CliResult r = h.Cli(TorchArgs(where, shape == "1-node" ? "1" : "2", model, fmt::format("mn{}", i)), 300);
      row.client_s = SecondsSince(t0);
      for (auto [name, u] : ReadUsage(groups.get())) {
        const auto before = cpu0.find(name);
        if (before != cpu0.end()) {
          u.cpu_ns -= before->second.cpu_ns;
          u.throttled_ns -= before->second.throttled_ns;
          u.nr_throttled -= before->second.nr_throttled;
        }
        row.cpu[name] = u;
      }
      const json m = r.json();
      row.run_id = m.is_object() ? m.value("run_id", "") : "";
      row.status = m.is_object() ? m.value("status", "?") : "?";
      if (row.run_id.empty()) {
        std::fprintf(stderr, "%s run %d: no run id (exit %d): %s\n", shape.c_str(), i, r.exit_code, r.err.c_str());
        return 1;
      }
      FromEvents(h.Cli({"events", row.run_id, "--json"}).json().value("events", json::array()), row);
      std::fprintf(stderr, "# %s %s: %s, client %.2f s, server %.2f s%s\n", shape.c_str(), row.run_id.c_str(),
                   row.status.c_str(), row.client_s, row.server_s, UsageLine(row.cpu).c_str());
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
  const std::string cpu_model =
      std::string(opt.core_per_host ? ", a core per simulated host" : "") +
      (opt.cgroup_cpu ? fmt::format(", cgroup caps: {} CPU per host, {}", opt.host_cpu,
                                    opt.npuprof_cpu == "none" ? std::string("npuprof uncapped")
                                                              : opt.npuprof_cpu + " CPU npuprof")
                      : "");
  std::printf("torch-profile, tp 2 per node, reference target delays%s; load %s -> %s\n", cpu_model.c_str(),
              load_before.c_str(), load_after.c_str());
  std::printf("%-8s %5s %12s %12s   %s\n", "shape", "runs", "server_med_s", "client_med_s", "server_s of each run");
  for (const std::string shape : {"1-node", "2-node"}) {
    std::string each;
    for (double v : server[shape]) each += fmt::format("{:.2f} ", v);
    std::printf("%-8s %5zu %12.2f %12.2f   %s\n", shape.c_str(), server[shape].size(), Median(server[shape]),
                Median(client[shape]), each.c_str());
  }
  if (groups) {  // CPU seconds per run and group, medians per shape
    for (const std::string shape : {"1-node", "2-node"}) {
      std::string line;
      for (const auto& name : kGroups) {
        std::vector<double> cpu, thr, nthr;
        for (const auto& r : rows)
          if (r.shape == shape && r.cpu.count(name)) {
            cpu.push_back(static_cast<double>(r.cpu.at(name).cpu_ns) / 1e9);
            thr.push_back(static_cast<double>(r.cpu.at(name).throttled_ns) / 1e9);
            nthr.push_back(static_cast<double>(r.cpu.at(name).nr_throttled));
          }
        line += fmt::format("  {} {:.2f} s (throttled {:.0f} times, {:.2f} s)", name, Median(cpu), Median(nthr),
                            Median(thr));
      }
      std::printf("%-8s cpu per run (medians):%s\n", shape.c_str(), line.c_str());
    }
  }
  PrintSteps(rows);
  const bool met = all_ok && ratio <= 1.10;
  std::printf("2-node / 1-node = %.3f (goal <= 1.10): %s%s\n", ratio, met ? "met" : "missed",
              all_ok ? "" : " (a run did not end ok)");
  if (!opt.json_out.empty()) {
    json out = {{"load_before", load_before}, {"load_after", load_after}, {"core_per_host", opt.core_per_host},
                {"cgroup_cpu", opt.cgroup_cpu ? json{{"host_cpu", opt.host_cpu}, {"npuprof_cpu", opt.npuprof_cpu}} : json(nullptr)},
                {"ratio", ratio}, {"goal_met", met},
                {"runs", json::array()}};
    for (const auto& r : rows) {
      json cpu = json::object();
      for (const auto& [name, u] : r.cpu)
        cpu[name] = {{"cpu_s", static_cast<double>(u.cpu_ns) / 1e9},
                     {"throttled_s", static_cast<double>(u.throttled_ns) / 1e9}};
      out["runs"].push_back({{"shape", r.shape}, {"run_id", r.run_id}, {"status", r.status},
                             {"client_s", r.client_s}, {"server_s", r.server_s}, {"cpu", cpu}});
    }
    std::ofstream(opt.json_out) << out.dump(2) << "\n";
  }
  return all_ok ? 0 : 1;
}

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) { return npuprof::bench::Main(argc, argv); }
