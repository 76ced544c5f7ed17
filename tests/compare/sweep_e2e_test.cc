// The sweep run kind end to end: `npuprof server` + local workers, a real
// loopback sshd and the simulated Ascend target. A memory-profile sweep over
// gpu-memory-utilization=0.8,0.9 whose report's KV-cache delta equals the
// simulator's ground-truth difference and whose weights delta is zero; a
// sweep over tp=1,2 (different device counts); a bad grid refused with
// nothing submitted; cancel of a running sweep reaching every child.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

const json& Row(const json& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r["key"] == key) return r;
  static const json none;
  ADD_FAILURE() << "no row " << key;
  return none;
}

class SweepE2E : public ::testing::Test {
 protected:
  void Start(const std::vector<std::string>& sim_args) {
    Status st = h_.Start(sim_args, 2);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  std::vector<std::string> Sweep(const std::vector<std::string>& grid_and_flags) {
    std::vector<std::string> a = {"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model",
                                  model_, "--max-tokens", "8"};
    a.insert(a.end(), grid_and_flags.begin(), grid_and_flags.end());
    return a;
  }
  json TruthForRun(const std::string& served_name_suffix) {
    for (const auto& t : h_.SimTruthFiles()) {
      const std::string name = t.value("served_model_name", "");
      if (name.size() >= served_name_suffix.size() &&
          name.compare(name.size() - served_name_suffix.size(), served_name_suffix.size(), served_name_suffix) == 0)
        return t;
    }
    return nullptr;
  }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
};

TEST_F(SweepE2E, GpuMemoryUtilizationSweepThenTpSweep) {
  Start({"--export-delay", "0.3"});
  CliResult r = h_.Cli(Sweep({"--tp", "1", "--grid", "gpu-memory-utilization=0.8,0.9", "--wait"}), 280);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json sum = r.json();
  const std::string sweep = sum.value("run_id", "");
  runs_ = {sweep, sweep + "-p0", sweep + "-p1"};
  EXPECT_EQ(sum["status"], "ok") << sum.dump(2);
  EXPECT_EQ(sum["sweep_status"], "ok");
  ASSERT_EQ(sum["children"].size(), 2u);
  EXPECT_EQ(sum["children"][0]["run_id"], sweep + "-p0");
  EXPECT_EQ(sum["children"][1]["point"], json({{"gpu-memory-utilization", "0.9"}}));
  for (const auto& c : sum["children"]) EXPECT_EQ(c["status"], "ok") << c.dump();
  // Each child is an ordinary run that names its sweep.
  const json child = h_.Cli({"manifest", sweep + "-p1"}).json();
  EXPECT_EQ(child["kind"], "memory-profile");
  EXPECT_EQ(child["gpu_memory_utilization"], 0.9) << child.dump();

  // The sweep's report is the compare of its points.
  CliResult rep = h_.Cli({"report", sweep, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const json c = rep.json();
  ASSERT_TRUE(c.is_object()) << rep.out;
  EXPECT_EQ(c["sweep"]["run_id"], sweep);
  EXPECT_EQ(c["runs"][1]["point"]["gpu-memory-utilization"], "0.9");
  const json& dev = c["devices"][0];
  double kv[2];
  for (int i = 0; i < 2; ++i) {
    const json t = TruthForRun(runs_[1 + i]);
    ASSERT_TRUE(t.is_object()) << "no simulator truth for " << runs_[1 + i];
    kv[i] = t["per_device"].begin().value()["components_mb"]["kv_cache"].get<double>();
  }
  EXPECT_GT(kv[1] - kv[0], 1000.0);
  EXPECT_NEAR(Row(dev["components"], "kv_cache")["delta_mb"][1].get<double>(), kv[1] - kv[0], 0.01);
  EXPECT_EQ(Row(dev["components"], "weights")["delta_mb"][1], 0.0);
  CliResult text = h_.Cli({"report", sweep, "--format", "text", "--lang", "en"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("[gpu-memory-utilization=0.9]"), std::string::npos) << text.out;
  CliResult html = h_.Cli({"report", sweep, "--format", "html", "-o", h_.Dir() + "/sweep.html"});
  EXPECT_EQ(html.exit_code, 0) << html.err;

  // tp=1,2: different device counts, matched by position; totals per run.
  CliResult tp = h_.Cli(Sweep({"--grid", "tp=1,2", "--wait", "--run-id", "tp-sweep"}), 280);
  ASSERT_EQ(tp.exit_code, 0) << tp.out << tp.err;
  runs_ = {"tp-sweep", "tp-sweep-p0", "tp-sweep-p1"};
  const json tc = h_.Cli({"report", "tp-sweep"}).json();
  ASSERT_TRUE(tc.is_object());
  ASSERT_EQ(tc["devices"].size(), 2u) << tc.dump();
  EXPECT_TRUE(tc["devices"][1]["device_ids"][0].is_null());
  EXPECT_EQ(tc["totals"]["device_counts"], json::array({1, 2}));
  bool tp_differs = false;
  for (const auto& f : tc["config_diff"]) tp_differs |= f["field"] == "tp";
  EXPECT_TRUE(tp_differs);
  // Submitting the same sweep id again returns it: no child twice.
  CliResult again = h_.Cli(Sweep({"--grid", "tp=1,2", "--run-id", "tp-sweep"}));
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_TRUE(again.json().value("existing", false)) << again.out;
}

TEST_F(SweepE2E, TorchProfileSweepReportsBenchmarkAndKernelsPerPoint) {
  Start({});
  CliResult r = h_.Cli({"submit", "sweep", "--kind", "torch-profile", "--machine", "sim1", "--model", model_,
                        "--served-model-name", "qwen", "--tp", "2", "--mode", "enforce_eager", "--request-kind", "text",
                        "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                        "--flush-seconds", "0", "--health-timeout", "60", "--grid", "benchmark-concurrency=1,2",
                        "--tag", "conc", "--run-id", "tp-sw", "--wait"},
                       280);
  runs_ = {"tp-sw", "tp-sw-p0", "tp-sw-p1"};
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.json()["sweep_status"], "ok") << r.out;
  const json c = h_.Cli({"report", "tp-sw"}).json();
  ASSERT_TRUE(c.is_object());
  EXPECT_EQ(c["kind"], "torch-profile");
  bool concurrency = false;
  for (const auto& f : c["config_diff"])
    if (f["field"] == "benchmark_concurrency") {
      concurrency = true;
      EXPECT_EQ(f["values"], json::array({1, 2}));
    }
  EXPECT_TRUE(concurrency) << c["config_diff"].dump();
  ASSERT_EQ(c["ranks"].size(), 2u);
  EXPECT_EQ(c["ranks"][0]["kernels"]["statuses"], json::array({"ok", "ok"}));
  EXPECT_EQ(c["runs"][1]["point"]["benchmark-concurrency"], "2");
}

TEST_F(SweepE2E, BadGridsAreRefusedBeforeAnythingIsSubmitted) {
  Start({});
  auto count_runs = [&] { return h_.Cli({"runs", "--json"}).json()["runs"].size(); };
  const size_t before = count_runs();
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"--grid", "tpp=1,2"}, "has no option --tpp"},
      {{"--grid", "tp=1,x"}, "grid point 1"},
      {{"--grid", "gpu-memory-utilization=0.8,1.5"}, "gpu_memory_utilization"},
      {{"--grid", "port=8000,8001"}, "not a grid key"},
      {{"--tp", "1", "--grid", "tp=1,2"}, "both a child flag and a --grid key"},
      {{"--grid", "enforce-eager=yes"}, "its values are true and false"},
  };
  for (const auto& c : cases) {
    CliResult r = h_.Cli(Sweep(c.args));
    EXPECT_EQ(r.exit_code, 2) << c.says << ": " << r.out;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  EXPECT_EQ(count_runs(), before);
}

TEST_F(SweepE2E, CancelReachesEveryUnfinishedChild) {
  Start({"--startup-delay", "3"});
  CliResult r = h_.Cli(Sweep({"--tp", "1", "--grid", "gpu-memory-utilization=0.7,0.8,0.9", "--run-id", "sw-c"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  runs_ = {"sw-c", "sw-c-p0", "sw-c-p1", "sw-c-p2"};
  // Wait until the first point's vLLM service is starting on the target
  // (the simulator writes its truth file at launch; a test may poll), so the
  // cancel has a live service to stop.
  bool launched = false;
  for (int i = 0; i < 300 && !launched; ++i) {
    launched = !h_.SimTruthFiles().empty();
    if (!launched) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(launched);
  EXPECT_EQ(h_.Cli({"show", "sw-c-p1"}).json().value("state", ""), "queued");  // waits for NPU 0
  CliResult cancel = h_.Cli({"cancel", "sw-c"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  json s;
  for (int i = 0; i < 600; ++i) {
    s = h_.Cli({"show", "sw-c"}).json();
    if (s.is_object() && s.value("status", "running") != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(s["status"], "cancelled") << s.dump(2);
  EXPECT_EQ(s["sweep_status"], "cancelled");
  for (const auto& c : s["children"]) EXPECT_EQ(c["status"], "cancelled") << c.dump();
  EXPECT_TRUE(h_.TargetProcessesAfter(30).empty()) << "processes left on the target";
}

}  // namespace
}  // namespace npuprof::testing
