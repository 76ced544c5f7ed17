// memory-profile over several machines end to end from the npuprof command:
// simulated hosts on their own loopback addresses, each behind its own sshd
// with its own NPUs and ground truth (state/truth/*.json of that host).
//
//   * 2 nodes x 4 NPUs (tp 4, dp 2) and 3 nodes (tp 2, dp 3): every device of
//     every node in the report keyed by (machine, device_id), each component
//     equal to that node's truth, totals per node and for the deployment,
//     the weights sharded with EP = TP x DP over every node for a MoE model;
//     text and html reports name the machines; nothing left on any node;
//   * the server SIGKILLed while both nodes export: the run resumes and
//     ends as if nothing happened;
//   * a node that never joins: the run fails within its readiness deadline
//     and nothing is left running on any node.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

constexpr const char* kTruthKeys[][2] = {
    {"fixed", "fixed_overhead"}, {"weights", "weights"}, {"kv_cache", "kv_cache"},
    {"graph_capture", "graph_capture"}, {"hccl", "hccl"}, {"runtime", "runtime"}, {"slog", "slog"},
    {"msprof_other", "msprof_other"}, {"activation_peak", "activation_peak"}, {"residual", "residual"}};

json Component(const json& dev, const std::string& key) {
  for (const auto& c : dev["components"])
    if (c["key"] == key) return c;
  return nullptr;
}

void ExpectNothingLeft(NpuprofHarness& h) {
  const auto left = h.TargetProcessesAfter(30);
  EXPECT_TRUE(left.empty()) << left.size() << " processes left on the simulated hosts";
  for (const std::string& n : h.NodeNames()) EXPECT_TRUE(h.LiveServicePids(n).empty()) << n;
}

class MemoryMultiNodeE2E : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(h_.Start({"--export-delay", "0.5"}).ok()); }
  void TearDown() override {
    if (HasFailure() && !run_.empty()) std::cerr << "events of " << run_ << ":\n" << h_.Cli({"events", run_}).out;
    h_.Stop();
  }
  void AddNodes(const std::vector<std::string>& names, const std::string& devices) {
    for (const auto& n : names) ASSERT_TRUE(h_.AddNode(n, {"--devices", devices, "--export-delay", "0.5"}).ok()) << n;
  }

  // Every device of the report against its node's truth (the one vLLM
  // instance that node ran), and the totals against the devices' sums.
  void ExpectReportMatchesEveryNode(const json& report, const std::vector<std::string>& nodes, size_t per_node) {
    ASSERT_TRUE(report.is_object());
    ASSERT_EQ(report["devices"].size(), nodes.size() * per_node) << report["devices"].dump();
    std::map<std::string, json> truth;
    for (const auto& n : nodes) {
      const auto t = h_.SimTruthFiles(n);
      ASSERT_EQ(t.size(), 1u) << n;
      truth[n] = t[0];
    }
    std::set<std::pair<std::string, int>> keys;
    for (const auto& dev : report["devices"]) {
      const std::string machine = dev.value("machine", "");
      const int id = dev.value("device_id", -1);
      ASSERT_TRUE(truth.count(machine)) << dev.dump().substr(0, 300);
      EXPECT_TRUE(keys.insert({machine, id}).second) << "(machine, device) twice: " << machine << " " << id;
      const json& per = truth[machine]["per_device"];
      ASSERT_TRUE(per.contains(std::to_string(id))) << machine << " " << id;
      const json& comps = per[std::to_string(id)]["components_mb"];
      for (const auto& [tk, rk] : kTruthKeys) {
        const json c = Component(dev, rk);
        ASSERT_TRUE(c.is_object()) << rk;
        ASSERT_TRUE(c["value_mb"].is_number()) << machine << " " << id << " " << rk << ": " << c.dump();
        EXPECT_NEAR(c["value_mb"].get<double>(), comps[tk].get<double>(), 1.0) << machine << " device " << id << " " << rk;
      }
    }
    // Totals per node and for the deployment: the sums of its devices.
    ASSERT_EQ(report["nodes"].size(), nodes.size());
    double all_used = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& n = report["nodes"][i];
      EXPECT_EQ(n["machine"], nodes[i]);
      EXPECT_EQ(n["devices"].size(), per_node);
      double used = 0, weights = 0;
      for (const auto& dev : report["devices"])
        if (dev["machine"] == nodes[i]) {
          used += dev["hbm_used_mb"].get<double>();
          weights += Component(dev, "weights")["value_mb"].get<double>();
        }
      EXPECT_NEAR(n["totals"]["hbm_used_mb"].get<double>(), used, 0.01) << nodes[i];
      EXPECT_NEAR(n["totals"]["components_mb"]["weights"].get<double>(), weights, 0.01) << nodes[i];
      all_used += used;
    }
    EXPECT_NEAR(report["totals"]["hbm_used_mb"].get<double>(), all_used, 0.01);
    EXPECT_EQ(report["totals"]["devices"], nodes.size() * per_node);
  }

  // Each node ran one vLLM with the data-parallel flags of its place, under msprof.
  void ExpectEachNodeRanItsPlace(const std::vector<std::string>& nodes, int dp_local) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const auto t = h_.SimTruthFiles(nodes[i]);
      ASSERT_EQ(t.size(), 1u) << nodes[i];
      std::string argv;
      for (const auto& a : t[0].value("argv", json::array())) argv += (a.is_string() ? a.get<std::string>() : a.dump()) + " ";
      EXPECT_NE(argv.find("--data-parallel-size-local " + std::to_string(dp_local)), std::string::npos) << argv;
      if (i == 0) {
        EXPECT_EQ(argv.find("--headless"), std::string::npos) << argv;
      } else {
        EXPECT_NE(argv.find("--headless --data-parallel-start-rank " + std::to_string(i * dp_local)), std::string::npos)
            << argv;
      }
      EXPECT_FALSE(t[0]["msprof_output"].is_null()) << nodes[i] << ": not run under msprof";
    }
  }

  NpuprofHarness h_;
  std::string run_;
};

TEST_F(MemoryMultiNodeE2E, TwoNodesOfFourNpusMoeTp4Dp2MatchEachNodesTruth) {
  AddNodes({"head", "worker"}, "4");
  const std::string model = h_.MakeModel({"--kind", "moe", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  CliResult r = h_.Cli({"submit", "memory-profile", "--node", "head:0,1,2,3", "--node", "worker", "--model", model,
                        "--tp", "4", "--dp", "2", "--enable-expert-parallel", "--wait"},
                       300);
  const json m = r.json();
  run_ = m.is_object() ? m.value("run_id", "") : "";
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 4000);
  EXPECT_EQ(m["status"], "ok");
  ExpectEachNodeRanItsPlace({"head", "worker"}, 1);
  ExpectReportMatchesEveryNode(m["report"], {"head", "worker"}, 4);
  // EP = TP x DP over both nodes, as the truth shards; the safetensors
  // per-device bytes (rule-based sharding, a corroboration) within 2 % of it
  // (the weights component itself, from each node's log, is checked above).
  const json truth = h_.SimTruthFiles("head")[0];
  EXPECT_EQ(truth["ep"], 8);
  EXPECT_EQ(m["report"]["weights_breakdown"]["ep"], 8) << m["report"]["weights_breakdown"].dump();
  const double truth_gib = truth["weights"]["per_device_bytes"].get<double>() / (1 << 30);
  EXPECT_NEAR(m["report"]["weights_breakdown"]["per_device_gib"].get<double>(), truth_gib, truth_gib * 0.02);
  // Each node's activation peak from its own msprof series.
  for (const auto& dev : m["report"]["devices"])
    EXPECT_EQ(Component(dev, "activation_peak")["source"], "series") << dev["machine"] << " " << dev["device_id"];

  // The report verb: json keyed by (machine, device), text and html naming the machines.
  CliResult rj = h_.Cli({"report", run_});
  ASSERT_EQ(rj.exit_code, 0) << rj.err;
  EXPECT_EQ(rj.json()["devices"].size(), 8u);
  EXPECT_EQ(rj.json()["devices"][4]["machine"], "worker");
  EXPECT_TRUE(rj.json()["totals"].is_object());
  CliResult rt = h_.Cli({"report", run_, "--format", "text", "--lang", "en"});
  ASSERT_EQ(rt.exit_code, 0) << rt.err;
  EXPECT_NE(rt.out.find("worker"), std::string::npos) << rt.out;
  EXPECT_NE(rt.out.find("Deployment"), std::string::npos) << rt.out;
  // The export: the head's files as for one node, every other node's under nodes/<machine>/.
  const std::string dir = h_.Dir() + "/export-mn";
  CliResult ex = h_.Cli({"export", run_, dir});
  ASSERT_EQ(ex.exit_code, 0) << ex.out << ex.err;
  for (const char* f : {"manifest.json", "after_ready_npu_smi.txt", "vllm_serve.log", "nodes/worker/baseline_npu_smi.txt",
                        "nodes/worker/after_infer_npu_smi.txt", "nodes/worker/vllm_serve.log"})
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir) / f)) << f;
  const std::string html = h_.Dir() + "/mn-report.html";
  CliResult rh = h_.Cli({"report", run_, "--format", "html", "-o", html});
  ASSERT_EQ(rh.exit_code, 0) << rh.err;
  ExpectNothingLeft(h_);
  CliResult verify = h_.Cli({"verify", run_});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(MemoryMultiNodeE2E, ThreeNodesTp2Dp3MatchEachNodesTruth) {
  AddNodes({"n0", "n1", "n2"}, "2");
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  CliResult r = h_.Cli({"submit", "memory-profile", "--node", "n0", "--node", "n1", "--node", "n2", "--model", model,
                        "--tp", "2", "--dp", "3", "--wait"},
                       300);
  const json m = r.json();
  run_ = m.is_object() ? m.value("run_id", "") : "";
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 4000);
  EXPECT_EQ(m["status"], "ok");
  ExpectEachNodeRanItsPlace({"n0", "n1", "n2"}, 1);
  ExpectReportMatchesEveryNode(m["report"], {"n0", "n1", "n2"}, 2);
  ExpectNothingLeft(h_);
}

// Every node's task is a task of the one run: a server SIGKILLed while both
// nodes' exports run resumes the run, which ends as if nothing happened.
TEST_F(MemoryMultiNodeE2E, ServerKilledDuringTheNodesExportsResumesAndMatchesEachNodesTruth) {
  for (const char* n : {"head", "worker"})
    ASSERT_TRUE(h_.AddNode(n, {"--devices", "2", "--export-delay", "5"}).ok()) << n;
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--node", "head", "--node", "worker", "--model", model, "--tp",
                        "2", "--dp", "2"});
  run_ = r.json().is_object() ? r.json().value("run_id", "") : "";
  ASSERT_FALSE(run_.empty()) << r.out << r.err;
  json st;
  for (int i = 0; i < 600; ++i) {  // up to 120 s, polled every 200 ms
    st = h_.Cli({"show", run_}).json();
    if (!st.is_object() || st.value("state", "") == "export" || st.value("status", "running") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(st.value("state", ""), "export") << st.dump().substr(0, 2000);
  h_.KillServer(SIGKILL);
  ASSERT_TRUE(h_.RestartServer().ok());
  for (int i = 0; i < 900; ++i) {
    st = h_.Cli({"show", run_}).json();
    if (st.is_object() && st.value("status", "running") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(st.value("status", ""), "ok") << st.dump().substr(0, 2000);
  const json m = h_.Cli({"manifest", run_}).json();
  ExpectReportMatchesEveryNode(m["report"], {"head", "worker"}, 2);
  ExpectNothingLeft(h_);
  CliResult verify = h_.Cli({"verify", run_});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(MemoryMultiNodeE2E, ANodeThatNeverJoinsFailsTheRunAndLeavesNothingOnAnyNode) {
  ASSERT_TRUE(h_.AddNode("head", {"--devices", "2"}).ok());
  ASSERT_TRUE(h_.AddNode("worker", {"--devices", "2", "--fault", "never_join"}).ok());
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--node", "head", "--node", "worker", "--model", model, "--tp",
                        "2", "--dp", "2", "--health-timeout", "15", "--stop-grace", "5", "--wait"},
                       240);
  const json m = r.json();
  run_ = m.is_object() ? m.value("run_id", "") : "";
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out.substr(0, 4000);
  EXPECT_EQ(m["status"], "failed");
  EXPECT_NE(m.value("error", "").find("ready"), std::string::npos) << m.value("error", "");
  // Every node's service was stopped (show: each node's record).
  const json show = h_.Cli({"show", run_}).json();
  ASSERT_TRUE(show["nodes"].is_array()) << show.dump().substr(0, 2000);
  EXPECT_EQ(show["nodes"].size(), 2u);
  for (const auto& n : show["nodes"]) EXPECT_EQ(n["stopped"], true) << n.dump();
  ExpectNothingLeft(h_);
}

}  // namespace
}  // namespace npuprof::testing
