// Soak: 40 runs of five kinds submitted at once against 4 simulated targets
// with 8 NPUs each (sim4 has no msprof, so its memory-profile runs must fail
// and its torch-profile runs must fail the kernel_details gate: analyse()
// cannot export CANN data without msprof), while one worker is SIGKILLed mid-task and the server is SIGKILLed
// and restarted once. Then:
//   * every run ends in the state the simulator dictates (memory-profile and
//     torch-profile on sim4 failed with the reason, everything else ok);
//   * no device was ever leased to two runs at once, checked here from the
//     exported events in global order (and by `npuprof verify`'s audit);
//   * runs did queue for devices (FIFO) at some point;
//   * analyse() ran once per rank and msprof exported once per run;
//   * nothing is left running on any target.
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/faults/fault_test_util.h"

namespace npuprof::testing {
namespace {

struct Planned {
  std::string run_id;
  std::string kind;
  std::string machine;
  std::string expect_status;
  std::string expect_error;  // substring of the error when failed
};

TEST(Soak, FortyMixedRunsFourTargetsWorkerKilledServerRestarted) {
  NpuprofHarness h;
  const std::vector<std::string> sim = {"--devices", "8", "--startup-delay", "0.2", "--export-delay", "0.3"};
  ASSERT_TRUE(h.Start(sim, 2).ok());
  ASSERT_TRUE(h.AddTarget("sim2", sim).ok());
  ASSERT_TRUE(h.AddTarget("sim3", sim).ok());
  std::vector<std::string> sim4 = sim;
  sim4.push_back("--msprof-missing");
  ASSERT_TRUE(h.AddTarget("sim4", sim4).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());

  const std::vector<std::string> kinds = {"probe", "torch-profile", "memory-profile", "serve", "torch-profile-tp4"};
  std::vector<Planned> runs;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 40; ++i) {
    const std::string machine = fmt::format("sim{}", 1 + i % 4);
    const std::string kind = kinds[i % kinds.size()];
    const std::string id = fmt::format("soak-{:02}-{}", i, kind);
    std::vector<std::string> a;
    if (kind == "probe") {
      a = {"submit", "probe", "--machine", machine};
    } else if (kind == "torch-profile" || kind == "torch-profile-tp4") {
      a = {"submit", "torch-profile", "--machine", machine, "--tag", "soak", "--model", model, "--served-model-name",
           "qwen", "--mode", "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "4",
           "--prompt-tokens", "32", "--benchmark-total-requests", "4", "--benchmark-concurrency", "2",
           "--flush-seconds", "0", "--health-timeout", "120", "--profile-control-timeout", "60",
           "--request-timeout", "60"};
      if (kind == "torch-profile") a.insert(a.end(), {"--tp", "2"});  // any two free NPUs
      else a.insert(a.end(), {"--tp", "4", "--devices", "4,5,6,7"});
    } else if (kind == "memory-profile") {
      // Devices 0,1 (the default): the memory runs of one target queue behind each other.
      a = {"submit", "memory-profile", "--machine", machine, "--model", model, "--tp", "2", "--port",
           std::to_string(FreeLoopbackPort()), "--flush-seconds", "0", "--health-timeout", "120"};
    } else {
      a = {"submit", "serve", "--machine", machine, "--model", model, "--tp", "1", "--health-timeout", "120"};
    }
    a.insert(a.end(), {"--run-id", id});
    CliResult r = h.Cli(a);
    ASSERT_EQ(r.exit_code, 0) << id << ": " << r.out << r.err;
    Planned p{id, kind, machine, "ok", ""};
    if (machine == "sim4" && kind == "memory-profile") p = {id, kind, machine, "failed", "msprof"};
    if (machine == "sim4" && kind.rfind("torch-profile", 0) == 0) p = {id, kind, machine, "failed", "missing_kernel_details"};
    runs.push_back(p);
  }

  // Follow the runs: stop ready serve runs, kill a worker after 8 runs
  // ended, restart the server after 16.
  bool worker_killed = false, server_restarted = false;
  size_t max_waiting = 0;
  std::set<std::string> stop_sent;
  std::map<std::string, json> rows;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(480);
  while (std::chrono::steady_clock::now() < deadline) {
    json list = h.Cli({"runs", "--json"}, 30).json();
    if (!list.is_object()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      continue;
    }
    size_t finished = 0, waiting = 0;
    for (const auto& row : list.value("runs", json::array())) {
      rows[row.value("run_id", "")] = row;
      finished += row.value("terminal", false);
      waiting += row.contains("waiting_for");
      const std::string id = row.value("run_id", "");
      if (row.value("kind", "") == "serve" && row.value("state", "") == "ready" && !stop_sent.count(id)) {
        if (h.Cli({"stop", id}, 30).exit_code == 0) stop_sent.insert(id);
      }
    }
    max_waiting = std::max(max_waiting, waiting);
    if (finished == runs.size()) break;
    if (!worker_killed && finished >= 8) {
      for (pid_t p : h.WorkerPids()) {
        json w = h.Cli({"workers"}, 30).json();
        bool busy = false;
        for (const auto& wk : w.value("workers", json::array()))
          if (wk.value("pid", -1) == p && !wk.value("tasks", json::array()).empty()) busy = true;
        if (busy) {
          std::cerr << "[soak] killing worker " << p << " after " << finished << " runs ended" << std::endl;
          kill(p, SIGKILL);
          worker_killed = true;
          break;
        }
      }
    }
    if (worker_killed && !server_restarted && finished >= 16) {
      std::cerr << "[soak] restarting the server after " << finished << " runs ended" << std::endl;
      h.KillServer(SIGKILL);
      ASSERT_TRUE(h.RestartServer().ok());
      server_restarted = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << fmt::format("[soak] 40 runs in {:.1f} s; at most {} queued for devices at once\n", secs, max_waiting);
  EXPECT_TRUE(worker_killed) << "no busy worker to kill";
  EXPECT_TRUE(server_restarted);
  EXPECT_GE(max_waiting, 1u) << "no run ever waited for a device lease";

  // Terminal states as the simulator dictates.
  for (const auto& p : runs) {
    const json s = ShowRun(h, p.run_id);
    ASSERT_TRUE(Finished(s)) << p.run_id << " did not end: " << s.dump(2);
    EXPECT_EQ(s.value("status", ""), p.expect_status) << p.run_id << ": " << s.value("error", json()).dump();
    if (p.expect_status == "failed") {
      EXPECT_NE(s.value("error", "").find(p.expect_error), std::string::npos) << p.run_id << ": " << s.dump();
    }
  }

  // No device held by two runs at any event position, from the exported log.
  struct LeaseEvent {
    uint64_t pos;
    std::string run, type, machine;
    std::vector<int> devices;
  };
  std::vector<LeaseEvent> lease_events;
  size_t grants = 0;
  for (const auto& p : runs)
    for (const auto& e : RunEvents(h, p.run_id)) {
      const std::string type = e.value("type", "");
      if (type != "DevicesLeased" && type != "DevicesReleased") continue;
      LeaseEvent le{e.value("global_pos", uint64_t{0}), p.run_id, type, e["payload"].value("machine", ""), {}};
      for (const auto& d : e["payload"].value("devices", json::array())) le.devices.push_back(d.get<int>());
      grants += type == "DevicesLeased";
      lease_events.push_back(le);
    }
  std::sort(lease_events.begin(), lease_events.end(), [](const auto& a, const auto& b) { return a.pos < b.pos; });
  std::map<std::pair<std::string, int>, std::string> holder;
  for (const auto& le : lease_events)
    for (int d : le.devices) {
      const auto key = std::make_pair(le.machine, d);
      if (le.type == "DevicesLeased") {
        EXPECT_FALSE(holder.count(key)) << fmt::format("position {}: {} leased device {} on {} held by {}", le.pos,
                                                       le.run, d, le.machine, holder[key]);
        holder[key] = le.run;
      } else {
        EXPECT_EQ(holder[key], le.run) << "position " << le.pos << ": release by a run that did not hold it";
        holder.erase(key);
      }
    }
  EXPECT_TRUE(holder.empty()) << holder.size() << " device(s) still leased after every run ended";
  EXPECT_EQ(grants, 32u) << "every run but the probes leased devices once";

  CliResult v = h.Cli({"verify"}, 120);
  EXPECT_EQ(v.exit_code, 0) << v.out.substr(0, 4000) << v.err;
  const json vj = v.json();
  EXPECT_TRUE(vj.is_object() && vj["lease_audit"].value("ok", false)) << v.out.substr(0, 2000);

  // Remote effects once; nothing left running.
  for (const auto& [dir, n] : h.InvocationLogs(".sim_analyse_invocations")) EXPECT_EQ(n, 1u) << dir;
  // msprof exported each capture itself at its service's exit: no run exported it again.
  EXPECT_TRUE(h.InvocationLogs(".sim_export_invocations").empty()) << "msprof --export ran";
  EXPECT_EQ(h.InvocationLogs(".sim_analyse_invocations").size(), 8u * 2 + 8u * 4) << "ranks analysed";
  const std::vector<pid_t> left = h.TargetProcessesAfter(5);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left on the targets";
  h.Stop();
}

}  // namespace
}  // namespace npuprof::testing
