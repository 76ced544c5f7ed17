// Torch-profile compare end to end: `npuprof server` + local workers, a real
// loopback sshd and the simulated Ascend target. Two tp=2 torch-profile runs
// of the same configuration; before the second, the simulator makes every
// MatMulV3 kernel 3x slower (config kernels.slow). The per-rank kernel
// summaries (read from kernel_details.csv over SSH) match the simulator's
// ground truth, `npuprof report` shows them, and the compare names MatMulV3
// as the Type and a kernel that moved most, by the factor the simulator used.
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class TorchCompareE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start({}, 2);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  std::string Collect(const std::string& tag) {
    CliResult r = h_.Cli({"submit", "torch-profile", "--machine", "sim1", "--model", model_, "--served-model-name",
                          "qwen", "--tp", "2", "--tag", tag, "--mode", "enforce_eager", "--request-kind", "text",
                          "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests",
                          "4", "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                          "--wait"},
                         170);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const json m = r.json();
    runs_.push_back(m.is_object() ? m.value("run_id", "") : "");
    return runs_.back();
  }
  // The simulator's kernels per rank of the profiling session of run i (in order).
  json TruthRanks(size_t i) {
    std::vector<json> sessions;
    for (const auto& t : h_.SimTruthFiles())
      for (const auto& s : t.value("profile_sessions", json::array())) sessions.push_back(s);
    std::sort(sessions.begin(), sessions.end(),
              [](const json& a, const json& b) { return a["start_at"].get<double>() < b["start_at"].get<double>(); });
    return i < sessions.size() ? sessions[i]["ranks"] : json();
  }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
};

double TypeTotal(const json& truth_kernels, const std::string& type, int* count) {
  double total = 0;
  *count = 0;
  for (const auto& k : truth_kernels)
    if (k["type"] == type) {
      total += k["total_us"].get<double>();
      *count += k["count"].get<int>();
    }
  return total;
}

TEST_F(TorchCompareE2E, ASlowerKernelIsTheTopMoverByTheSimulatorsFactor) {
  const std::string a = Collect("fast");
  ASSERT_FALSE(a.empty());
  ASSERT_TRUE(h_.UpdateTarget({"--set", "kernels.slow={\"MatMulV3\": 3.0}"}).ok());
  const std::string b = Collect("slow-matmul");
  ASSERT_FALSE(b.empty());

  // Each run's summaries against the simulator's ground truth, per rank.
  for (size_t i = 0; i < 2; ++i) {
    const json m = h_.Cli({"manifest", runs_[i]}).json();
    const json truth = TruthRanks(i);
    ASSERT_TRUE(truth.is_array() && truth.size() == 2) << truth.dump();
    ASSERT_EQ(m["remote_profile_dirs"].size(), 2u);
    for (const auto& d : m["remote_profile_dirs"]) {
      const json& ks = d["kernel_summary"];
      ASSERT_TRUE(ks.is_object() && !ks.contains("error")) << ks.dump();
      EXPECT_FALSE(ks["truncated"].get<bool>());
      const json* tr = nullptr;
      for (const auto& t : truth)
        if (t["dir"] == d["path"]) tr = &t;
      ASSERT_NE(tr, nullptr) << d["path"];
      int count = 0;
      const double want = TypeTotal((*tr)["kernels"], "MatMulV3", &count);
      ASSERT_GT(count, 0);
      bool seen = false;
      for (const auto& t : ks["by_type"])
        if (t["type"] == "MatMulV3") {
          seen = true;
          EXPECT_EQ(t["count"], count);
          EXPECT_NEAR(t["total_us"].get<double>(), want, 0.001 * count + 0.01) << t.dump();
        }
      EXPECT_TRUE(seen) << ks.dump();
      size_t truth_rows = 0;
      for (const auto& k : (*tr)["kernels"]) truth_rows += k["count"].get<size_t>();
      EXPECT_EQ(ks["counted_rows"], truth_rows);
    }
  }

  // The report shows the run's kernels.
  CliResult rt = h_.Cli({"report", b, "--format", "text", "--lang", "en"});
  EXPECT_EQ(rt.exit_code, 0) << rt.err;
  EXPECT_NE(rt.out.find("kernel summary:"), std::string::npos) << rt.out;
  EXPECT_NE(rt.out.find("MatMulV3"), std::string::npos) << rt.out;
  const json rj = h_.Cli({"report", b}).json();
  ASSERT_TRUE(rj.is_object());
  EXPECT_EQ(rj["ranks"].size(), 2u);
  EXPECT_EQ(rj["ranks"][0]["kernel_summary"]["by_type"][0]["type"], "MatMulV3") << rj.dump();

  // The compare: MatMulV3 moved most, by the factor the simulator used.
  CliResult cj = h_.Cli({"compare", a, b, "--format", "json"});
  ASSERT_EQ(cj.exit_code, 0) << cj.out << cj.err;
  const json c = cj.json();
  for (const auto& row : c["benchmark"]) {
    if (row["key"] != "throughput_ok_req_per_s") continue;
    for (const auto& v : row["values"]) {
      EXPECT_GT(v.get<double>(), 0) << row.dump();
    }
  }
  ASSERT_EQ(c["ranks"].size(), 2u) << cj.out;
  for (const auto& r : c["ranks"]) {
    const json& k = r["kernels"];
    EXPECT_EQ(k["statuses"], json::array({"ok", "ok"}));
    const json& top_type = k["by_type"][0];
    EXPECT_EQ(top_type["type"], "MatMulV3") << k.dump();
    EXPECT_EQ(top_type["count"][0], top_type["count"][1]);
    const double ta = top_type["total_us"][0].get<double>(), tb = top_type["total_us"][1].get<double>();
    EXPECT_NEAR(tb / ta, 3.0, 0.01) << top_type.dump();
    EXPECT_NEAR(top_type["delta_us"][1].get<double>(), tb - ta, 0.01);
    EXPECT_NEAR(top_type["delta_pct"][1].get<double>(), 200.0, 1.0);
    // Every other Type took the same time in both runs.
    for (const auto& t : k["by_type"]) {
      if (t["type"] != "MatMulV3") {
        EXPECT_NEAR(t["delta_us"][1].get<double>(), 0.0, 0.01) << t.dump();
      }
    }
    ASSERT_FALSE(k["top_movers"].empty());
    EXPECT_EQ(k["top_movers"][0]["type"], "MatMulV3") << k["top_movers"].dump();
    EXPECT_GT(k["top_movers"][0]["delta_us"][1].get<double>(), 0);
  }
  CliResult ct = h_.Cli({"compare", a, b, "--format", "text", "--lang", "en"});
  EXPECT_EQ(ct.exit_code, 0) << ct.err;
  EXPECT_NE(ct.out.find("top movers"), std::string::npos) << ct.out;
  EXPECT_NE(ct.out.find("MatMulV3"), std::string::npos);
}

}  // namespace
}  // namespace npuprof::testing
