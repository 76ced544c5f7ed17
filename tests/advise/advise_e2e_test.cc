// `npuprof advise` end to end: `npuprof server` + local workers, a real
// loopback sshd and the simulated Ascend target with another user's process
// holding 30000 MB on NPU 0 (the simulator's --busy). A memory-profile at
// utilization 0.5 fails: the simulated vLLM counts that HBM, logs a negative
// `Available KV cache memory` and stops. `advise` names the cause (the other
// process, by the pid the simulator gave it), the largest safe utilization
// and the KV tokens it buys; `advise --verify --wait` runs that sweep, whose
// KV tokens the simulator's ground truth must put within 1 % of the
// prediction; a later `advise` reads the verification back from the stored
// runs.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class AdviseE2E : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  json SimConfig() {
    std::ifstream f(h_.SimRoot() + "/state/config.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return json::parse(ss.str(), nullptr, false);
  }
  json TruthFor(const std::string& run) {
    for (const auto& t : h_.SimTruthFiles())
      if (t.value("served_model_name", "") == "npuprof-mem-" + run) return t;
    return nullptr;
  }

  NpuprofHarness h_;
  std::vector<std::string> runs_;
};

TEST_F(AdviseE2E, NegativeKvCacheFromAnotherProcessThenVerifiedSweep) {
  ASSERT_TRUE(h_.Start({"--export-delay", "0.3", "--busy", "0:proc=30000"}, 2).ok());
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  const json cfg = SimConfig();
  ASSERT_TRUE(cfg.is_object());
  const json busy = cfg["busy"][0];  // the simulator's truth of the other process
  runs_ = {"neg"};

  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "1",
                        "--gpu-memory-utilization", "0.5", "--max-tokens", "8", "--run-id", "neg", "--wait"},
                       200);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(r.json().value("status", ""), "failed") << r.out;

  CliResult a = h_.Cli({"advise", "neg"});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const json adv = a.json();
  ASSERT_TRUE(adv.is_object()) << a.out;
  EXPECT_EQ(adv["run_id"], "neg");
  ASSERT_FALSE(adv["findings"].empty()) << adv.dump(2);
  const json f = adv["findings"][0];
  EXPECT_EQ(f["rule"], "kv_cache_low");
  EXPECT_EQ(f["severity"], "critical");
  EXPECT_EQ(f["cause"], "other_process_hbm");
  EXPECT_EQ(f["cause_detail"]["processes"][0]["pid"], busy["pid"]) << f.dump(2);
  EXPECT_EQ(f["cause_detail"]["processes"][0]["memory_mb"], busy["mb"]);
  bool negative_line = false;
  for (const auto& e : f["evidence"])
    negative_line |= e.value("field", "") == "kv_cache_available_gib" && e["value"].get<double>() < 0 &&
                     e.value("text", "").find("Available KV cache memory: -") != std::string::npos;
  EXPECT_TRUE(negative_line) << f["evidence"].dump(2);
  const json& sug = f["suggestion"];
  const double util = sug["flags"]["gpu_memory_utilization"].get<double>();
  EXPECT_GT(util, 0.5);
  ASSERT_TRUE(sug["predicted"]["kv_tokens"].is_number_integer()) << sug.dump(2);
  const int64_t predicted = sug["predicted"]["kv_tokens"].get<int64_t>();
  EXPECT_EQ(sug["command"].get<std::string>().rfind("npuprof submit sweep ", 0), 0u) << sug.dump();
  EXPECT_EQ(f["verification"]["status"], "not_run");

  // --verify: the sweep runs the remedy; the simulator's truth of its point
  // puts the KV tokens within 1 % of the prediction.
  const std::string sweep = sug["verify_run_id"];
  runs_ = {"neg", sweep, sweep + "-p0"};
  CliResult v = h_.Cli({"advise", "neg", "--verify", "--wait"}, 300);
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  const json truth = TruthFor(sweep + "-p0");
  ASSERT_TRUE(truth.is_object()) << "no simulator truth for " << sweep << "-p0";
  EXPECT_DOUBLE_EQ(truth["gpu_memory_utilization"].get<double>(), util);
  const double actual = truth["kv_cache_tokens"].get<double>();
  EXPECT_LE(std::fabs(static_cast<double>(predicted) - actual) / actual, 0.01)
      << "predicted " << predicted << " truth " << actual;
  const json vf = v.json()["findings"][0]["verification"];
  EXPECT_EQ(vf["status"], "ok") << vf.dump(2);
  EXPECT_EQ(vf["matched"], true) << vf.dump(2);
  EXPECT_EQ(vf["points"][0]["measured_kv_tokens"], truth["kv_cache_tokens"]);

  // Read back from the stored runs: a later advise and the sweep itself say so.
  const json again = h_.Cli({"advise", "neg"}).json();
  EXPECT_EQ(again["findings"][0]["verification"]["matched"], true);
  const json shown = h_.Cli({"show", sweep}).json();
  EXPECT_EQ(shown["advice"]["run_id"], "neg") << shown.dump(2);
  EXPECT_EQ(shown["advice_verdict"]["rule"], f["rule"]) << shown.dump(2);
  EXPECT_EQ(shown["advice_verdict"]["verification"]["matched"], true) << shown.dump(2);
  EXPECT_EQ(shown["advice_verdict"]["verification"]["points"][0]["measured_kv_tokens"], truth["kv_cache_tokens"]);
  EXPECT_FALSE(h_.Cli({"show", "neg"}).json().contains("advice_verdict")) << "only a sweep testing advice has one";
  CliResult text = h_.Cli({"advise", "neg", "--format", "text"});
  EXPECT_NE(text.out.find("other_process_hbm"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("within 1 %"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace npuprof::testing
