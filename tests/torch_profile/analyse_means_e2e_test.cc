// analyse() within the target's means, end to end (`npuprof` -> server ->
// four local workers -> sshd -> simulated target): a host with 4 cores and
// memory for 2 ranks at a time never runs more than 2 analyse() processes
// at once, and the run says why; --analyse-parallel replaces the choice and
// is refused out of range. The simulated host kills an analyse() whose
// memory does not fit (tests/sim/README.md "Real scale and the host's
// means"), so running more at once than the host holds fails the run, and
// the overlap is read from the target's own record of each analyse()'s
// start and end (state/timeline.jsonl).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

// Each rank: 20,000 rows x 256 bytes of raw device data (~5.1 MB, the rest
// of the dir ~0.2 MB), so 20x the largest is 102-110 MB; 250 MB available
// holds two at a time, not three. The simulated analyse() claims 20x its
// raw size while it runs.
const std::vector<std::string> kHost = {"--startup-delay", "0.2", "--export-delay", "0.2",
                                        "--set", "host.cores=4", "--set", "host.mem_available_mb=250",
                                        "--set", "scale.rows_per_rank=20000", "--set", "scale.raw_bytes_per_row=256",
                                        "--set", "analyse.peak_mb_per_mb=20", "--set", "delays.analyse=1.5"};

class AnalyseMeansE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start(kHost, 4);  // more workers than the host's means allow
    ASSERT_TRUE(st.ok()) << st.message();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override { h_.Stop(); }

  std::vector<std::string> Args(const std::string& tag, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a = {"submit", "torch-profile", "--machine", "sim1", "--model", model_,
                                  "--served-model-name", "qwen", "--tp", "4", "--tag", tag, "--mode",
                                  "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "4",
                                  "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                                  "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                                  "--profile-control-timeout", "30", "--request-timeout", "30"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  json Collect(const std::string& tag, const std::vector<std::string>& extra = {}) {
    auto a = Args(tag, extra);
    a.push_back("--wait");
    CliResult r = h_.Cli(a, 200);
    json m = r.json();
    EXPECT_TRUE(m.is_object()) << "stdout: " << r.out << "\nstderr: " << r.err;
    return m.is_object() ? m : json::object();
  }

  // The target's analyse() pieces under `root` (start, end, line), from its timeline.
  std::vector<json> AnalyseRuns(const std::string& root) const {
    std::vector<json> out;
    std::ifstream in(h_.SimRoot() + "/state/timeline.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const json e = json::parse(line, nullptr, false);
      if (e.is_object() && e.value("what", "") == "analyse" && e.value("path", "").rfind(root, 0) == 0)
        out.push_back(e);
    }
    return out;
  }

  // The most analyse() calls running at one instant.
  static int MostAtOnce(const std::vector<json>& runs) {
    std::vector<std::pair<double, int>> edges;
    for (const json& r : runs) {
      edges.emplace_back(r.value("start", 0.0), 1);
      edges.emplace_back(r.value("end", 0.0), -1);
    }
    std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
    int most = 0, now = 0;
    for (const auto& [t, d] : edges) most = std::max(most, now += d);
    return most;
  }

  NpuprofHarness h_;
  std::string model_;
};

TEST_F(AnalyseMeansE2E, ConcurrencyFollowsTheTargetsCoresAndMemory) {
  const json m = Collect("means");
  ASSERT_EQ(m.value("status", ""), "ok") << m.dump(2);
  ASSERT_EQ(m.value("rank_count", 0), 4);
  const json limits = m.value("analyse_limits", json::array());
  ASSERT_EQ(limits.size(), 1u) << m.dump(2);
  EXPECT_EQ(limits[0].value("limit", 0), 2) << limits.dump(2);
  EXPECT_EQ(limits[0].value("source", ""), "means");
  EXPECT_EQ(limits[0].value("cores", 0), 4);
  const std::string reason = limits[0].value("reason", "");
  EXPECT_EQ(reason.rfind("4 cores, 250.0 MiB available, largest rank ", 0), 0u) << reason;
  EXPECT_NE(reason.find("→ 2 at a time (bound by memory)"), std::string::npos) << reason;
  std::cerr << "[means] " << reason << std::endl;

  const std::vector<json> runs = AnalyseRuns(m.value("remote_profile_root", std::string("?")));
  ASSERT_EQ(runs.size(), 4u);
  for (const json& r : runs) EXPECT_FALSE(r.value("oom", true)) << r.dump();
  EXPECT_EQ(MostAtOnce(runs), 2) << "analyse() processes at once on a host with memory for 2";
}

TEST_F(AnalyseMeansE2E, AnalyseParallelReplacesTheChoiceAndIsCheckedFirst) {
  for (const char* bad : {"0", "-1", "1025"}) {
    CliResult r = h_.Cli(Args("bad", {"--analyse-parallel", bad}));
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--analyse-parallel " + std::string(bad) + " is not allowed"), std::string::npos) << r.err;
  }
  CliResult root = h_.Cli({"submit", "analyse-root", "--machine", "sim1", "--profile-root", "/tmp/x",
                           "--expected-ranks", "1", "--analyse-parallel", "0"});
  EXPECT_EQ(root.exit_code, 2) << root.out << root.err;

  const json m = Collect("one", {"--analyse-parallel", "1"});
  ASSERT_EQ(m.value("status", ""), "ok") << m.dump(2);
  const json limits = m.value("analyse_limits", json::array());
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0].value("reason", ""), "--analyse-parallel 1");
  EXPECT_EQ(limits[0].value("source", ""), "override");
  const std::vector<json> runs = AnalyseRuns(m.value("remote_profile_root", std::string("?")));
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(MostAtOnce(runs), 1);
}

// The host really holds only two: four at once (the override) get
// analyse() processes killed out of memory and the run fails, so the
// overlap the first test sees is the limit's doing.
TEST_F(AnalyseMeansE2E, MoreAtOnceThanTheHostHoldsIsKilled) {
  const json m = Collect("four", {"--analyse-parallel", "4"});
  EXPECT_EQ(m.value("status", ""), "failed") << m.dump(2);
  const std::vector<json> runs = AnalyseRuns(m.value("remote_profile_root", std::string("?")));
  EXPECT_TRUE(std::any_of(runs.begin(), runs.end(), [](const json& r) { return r.value("oom", false); }))
      << "no analyse() was killed out of memory";
}

}  // namespace
}  // namespace npuprof::testing
