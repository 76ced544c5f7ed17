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
//     and nothing is left running on any node;
//   * the worker's clock 3.2 s ahead: its activation peak still equals its
//     truth (its series is cut at the inference window moved onto its clock
//     by the measured offsets), the manifest carries both offsets, and the
//     html page (rendered in headless Chromium) and the trace show both
//     nodes' devices on one clock;
//   * a headless node whose vLLM is killed (by its own pid) during the
//     inference: the run fails within its deadline naming the node, and
//     nothing is left running on any node.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/support/npuprof_harness.h"
#include "tests/views/chromium_rig.h"
#include "tests/views/trace_validator.h"

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
    ASSERT_TRUE(h_.AddNode(n, {"--devices", "2", "--export-delay", "5", "--set", "msprof_auto_export=false"}).ok())
        << n;
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

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(MemoryMultiNodeE2E, AWorkerClockAheadIsCutOnItsOwnClockAndEveryNodeIsDrawnOnOneClock) {
  constexpr double kAheadMs = 3200;
  // Activation released after the request: only the series cut at the right
  // instant sees it (npu-smi after the request shows none of it).
  ASSERT_TRUE(h_.AddNode("head", {"--devices", "2", "--export-delay", "0.5", "--activation", "released"}).ok());
  ASSERT_TRUE(h_.AddNode("worker", {"--devices", "2", "--export-delay", "0.5", "--activation", "released",
                                    "--clock-offset-s", "3.2"})
                  .ok());
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  CliResult r = h_.Cli({"submit", "memory-profile", "--node", "head", "--node", "worker", "--model", model, "--tp",
                        "2", "--dp", "2", "--wait"},
                       300);
  const json m = r.json();
  run_ = m.is_object() ? m.value("run_id", "") : "";
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out.substr(0, 4000);
  // Every component of every device, the worker's activation peak included,
  // equals its node's truth; each peak from its own node's series.
  ExpectReportMatchesEveryNode(m["report"], {"head", "worker"}, 2);
  for (const auto& dev : m["report"]["devices"])
    EXPECT_EQ(Component(dev, "activation_peak")["source"], "series") << dev["machine"] << " " << dev["device_id"];
  // Both offsets recorded; the worker's within 20 ms of the truth, or within
  // the uncertainty the measure recorded when the machine is loaded.
  std::map<std::string, json> offsets;
  for (const auto& o : m["clock_offsets"]["start"]["offsets"]) offsets[o.value("machine", "")] = o;
  ASSERT_EQ(offsets.size(), 2u) << m["clock_offsets"].dump();
  ASSERT_TRUE(offsets["worker"]["offset_ms"].is_number()) << offsets["worker"].dump();
  ASSERT_TRUE(offsets["head"]["offset_ms"].is_number()) << offsets["head"].dump();
  const double bound = std::max(20.0, offsets["worker"].value("uncertainty_ms", 0.0));
  EXPECT_NEAR(offsets["worker"]["offset_ms"].get<double>(), kAheadMs, bound) << offsets["worker"].dump();
  // Measured again as the services stopped: the same truth.
  std::map<std::string, json> at_end;
  for (const auto& o : m["clock_offsets"]["end"]["offsets"]) at_end[o.value("machine", "")] = o;
  ASSERT_EQ(at_end.size(), 2u) << m["clock_offsets"].dump();
  ASSERT_TRUE(at_end["worker"]["offset_ms"].is_number()) << at_end["worker"].dump();
  EXPECT_NEAR(at_end["worker"]["offset_ms"].get<double>(), kAheadMs,
              std::max(20.0, at_end["worker"].value("uncertainty_ms", 0.0)))
      << at_end["worker"].dump();
  // The worker's evidence says on which clock its series was cut.
  const json data = h_.Cli({"show", run_}).json();
  EXPECT_TRUE(data["clock"]["start"].is_object()) << data.dump().substr(0, 2000);

  // The html page: both nodes' curves, each device labelled with its machine.
  const std::string html = h_.Dir() + "/mn-clock.html";
  CliResult rh = h_.Cli({"report", run_, "--format", "html", "--lang", "en", "-o", html});
  ASSERT_EQ(rh.exit_code, 0) << rh.err;
  const std::string page = ReadFile(html);
  EXPECT_EQ(page.find("No msprof npu_mem series"), std::string::npos) << "every device has its curve";
  size_t curves = 0;
  for (size_t p = page.find("<polyline"); p != std::string::npos; p = page.find("<polyline", p + 1)) ++curves;
  EXPECT_EQ(curves, 4u) << "one curve per device of both nodes";
  for (const char* label : {"Device 0 @ head (Device)", "Device 1 @ head (Device)", "Device 0 @ worker (Device)",
                            "Device 1 @ worker (Device)"})
    EXPECT_NE(page.find(label), std::string::npos) << label;
  if (FindChromium().empty()) {
    std::cerr << "chromium is not installed: the browser part of this test is skipped" << std::endl;
  } else {
    auto shown = RenderInChromium(html, h_.Dir() + "/chromium-mn");
    ASSERT_TRUE(shown.ok()) << shown.status().message();
    for (const auto& line : shown->console) ADD_FAILURE() << "console: " << line;
    for (const auto& url : shown->page_requests) ADD_FAILURE() << "the page requested " << url;
    EXPECT_GT(shown->png.non_background_fraction, 0.02);
    for (const char* s : {"Device 0 @ worker", "Device 1 @ head", "Deployment totals"})
      EXPECT_NE(shown->dom.find(s), std::string::npos) << s;
  }

  // The trace: one process per node, each holding its devices' HBM, on one
  // clock: both nodes' msprof stopped sampling when the stop (at once on
  // every node) ended them, so their last samples lie close together, not
  // 3.2 s apart.
  const std::string trace_file = h_.Dir() + "/mn-clock.trace.json";
  CliResult rt = h_.Cli({"trace", run_, "-o", trace_file});
  ASSERT_EQ(rt.exit_code, 0) << rt.err;
  const TraceCheck tc = ValidateChromeTrace(ReadFile(trace_file));
  ASSERT_TRUE(tc.ok()) << tc.problems.front();
  EXPECT_EQ(tc.process_names.at(2000).rfind("node 0 head (clock ", 0), 0u) << tc.process_names.at(2000);
  EXPECT_EQ(tc.process_names.at(2001).rfind("node 1 worker (clock +3", 0), 0u) << tc.process_names.at(2001);
  std::map<int, double> last_sample;
  std::map<int, std::set<std::string>> tracks;
  for (const auto& e : tc.events) {
    if (e["ph"] != "C") continue;
    const int pid = e["pid"].get<int>();
    tracks[pid].insert(e["name"].get<std::string>());
    last_sample[pid] = std::max(last_sample[pid], e["ts"].get<double>());
  }
  EXPECT_EQ(tracks[2000].size(), 2u) << "the head's two devices";
  EXPECT_EQ(tracks[2001].size(), 2u) << "the worker's two devices";
  EXPECT_LT(std::abs(last_sample[2000] - last_sample[2001]), 2e6)
      << "the nodes' last samples (µs): " << last_sample[2000] << " " << last_sample[2001];
  ExpectNothingLeft(h_);
  CliResult verify = h_.Cli({"verify", run_});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(MemoryMultiNodeE2E, AHeadlessNodeKilledDuringTheInferenceFailsTheRunNamingIt) {
  // Slow tokens (128 of them at 40 ms: ~5 s) so the inference lasts long enough to be caught.
  for (const char* n : {"head", "worker"})
    ASSERT_TRUE(h_.AddNode(n, {"--devices", "2", "--token-delay", "0.04"}).ok()) << n;
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  CliResult r = h_.Cli({"submit", "memory-profile", "--node", "head", "--node", "worker", "--model", model, "--tp",
                        "2", "--dp", "2", "--stop-grace", "5"});
  run_ = r.json().is_object() ? r.json().value("run_id", "") : "";
  ASSERT_FALSE(run_.empty()) << r.out << r.err;
  json st;
  for (int i = 0; i < 600; ++i) {  // up to 120 s, polled every 200 ms
    st = h_.Cli({"show", run_}).json();
    if (!st.is_object() || st.value("state", "") == "inference" || st.value("status", "running") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_EQ(st.value("state", ""), "inference") << st.dump().substr(0, 2000);
  const std::vector<pid_t> pids = h_.LiveServicePids("worker");
  ASSERT_EQ(pids.size(), 1u) << "the worker's one vLLM";
  ASSERT_EQ(kill(pids[0], SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  for (int i = 0; i < 900; ++i) {  // up to 180 s
    st = h_.Cli({"show", run_}).json();
    if (st.is_object() && st.value("status", "running") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - killed);
  EXPECT_EQ(st.value("status", ""), "failed") << st.dump().substr(0, 2000);
  EXPECT_NE(st.value("error", "").find("node 1 (worker)"), std::string::npos) << st.value("error", "");
  // The watch (every 2 s), the logs and the stop of both nodes (grace 5 s each, at once).
  EXPECT_LT(took.count(), 90) << "the run failed " << took.count() << " s after the kill";
  ExpectNothingLeft(h_);
  CliResult verify = h_.Cli({"verify", run_});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

}  // namespace
}  // namespace npuprof::testing
