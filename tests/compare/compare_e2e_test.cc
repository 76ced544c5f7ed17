// `npuprof compare` end to end: `npuprof server` + local workers, a real
// loopback sshd and the simulated Ascend target (tests/sim). Two
// memory-profile runs that differ only in --gpu-memory-utilization (0.8 and
// 0.9, at once on disjoint NPUs); their compare's KV-cache delta equals the
// difference of the simulator's ground truth (state/truth/*.json) and the
// weights delta is zero; text and html render; runs of different kinds
// and fewer than 2 runs are refused with exit 2.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const json& Row(const json& rows, const std::string& key) {
  for (const auto& r : rows)
    if (r["key"] == key) return r;
  static const json none;
  ADD_FAILURE() << "no row " << key;
  return none;
}

class CompareE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start({"--export-delay", "0.5"});
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  static int FreePort() {
    static int next = 24000 + (::getpid() % 2000) * 7;
    return next++;
  }
  // Polls `show` until the run has ended (a test may poll; product code watches signals).
  json WaitForEnd(const std::string& run, int timeout_s = 200) {
    json s;
    for (int i = 0; i < timeout_s * 5; ++i) {
      s = h_.Cli({"show", run}).json();
      if (s.is_object() && s.value("status", "running") != "running") return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  json TruthForPort(int port) {
    for (const auto& t : h_.SimTruthFiles())
      if (t.value("port", 0) == port) return t;
    return nullptr;
  }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
};

TEST_F(CompareE2E, GpuMemoryUtilizationSweepMovesKvCacheByTheTruthAndLeavesWeights) {
  const std::pair<const char*, const char*> configs[] = {{"0.8", "0"}, {"0.9", "1"}};
  std::vector<int> ports;
  for (const auto& [gmu, dev] : configs) {
    ports.push_back(FreePort());
    CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "1",
                          "--devices", dev, "--port", std::to_string(ports.back()), "--gpu-memory-utilization", gmu});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    runs_.push_back(r.json().value("run_id", ""));
    ASSERT_FALSE(runs_.back().empty()) << r.out;
  }
  for (const auto& run : runs_) ASSERT_EQ(WaitForEnd(run).value("status", ""), "ok") << run;

  CliResult cj = h_.Cli({"compare", runs_[0], runs_[1], "--format", "json"});
  ASSERT_EQ(cj.exit_code, 0) << cj.out << cj.err;
  const json c = cj.json();
  ASSERT_TRUE(c.is_object()) << cj.out;
  EXPECT_EQ(c["reference_run"], runs_[0]);
  bool gmu = false;
  for (const auto& f : c["config_diff"])
    if (f["field"] == "gpu_memory_utilization") {
      gmu = true;
      EXPECT_EQ(f["values"], json::array({0.8, 0.9}));
    }
  EXPECT_TRUE(gmu) << c["config_diff"].dump();
  ASSERT_EQ(c["devices"].size(), 1u);
  const json& dev = c["devices"][0];
  EXPECT_EQ(dev["device_ids"], json::array({0, 1}));

  const json ta = TruthForPort(ports[0]), tb = TruthForPort(ports[1]);
  ASSERT_TRUE(ta.is_object() && tb.is_object());
  const double kv_a = ta["per_device"]["0"]["components_mb"]["kv_cache"].get<double>();
  const double kv_b = tb["per_device"]["1"]["components_mb"]["kv_cache"].get<double>();
  EXPECT_GT(kv_b - kv_a, 1000.0);
  const json& kv = Row(dev["components"], "kv_cache");
  ASSERT_TRUE(kv["delta_mb"][1].is_number()) << kv.dump();
  EXPECT_NEAR(kv["delta_mb"][1].get<double>(), kv_b - kv_a, 0.01) << kv.dump();
  EXPECT_NEAR(kv["values_mb"][0].get<double>(), kv_a, 0.01);
  // Each value keeps its run's evidence: the vLLM log line of that run.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(kv["evidence"][i].is_array()) << kv.dump();
    EXPECT_EQ(kv["evidence"][i][0]["file"], "vllm_serve.log");
    EXPECT_EQ(kv["evidence"][i][0]["blob"].get<std::string>().size(), 64u);
  }
  EXPECT_NE(kv["evidence"][0][0]["blob"], kv["evidence"][1][0]["blob"]);
  const json& w = Row(dev["components"], "weights");
  EXPECT_EQ(w["delta_mb"][1], 0.0) << w.dump();
  EXPECT_NEAR(Row(c["totals"]["components"], "kv_cache")["delta_mb"][1].get<double>(), kv_b - kv_a, 0.01);
  EXPECT_GT(dev["kv_cache_tokens"]["delta"][1].get<double>(), 0) << dev["kv_cache_tokens"].dump();

  CliResult ct = h_.Cli({"compare", runs_[0], runs_[1], "--format", "text", "--lang", "en"});
  EXPECT_EQ(ct.exit_code, 0) << ct.err;
  EXPECT_NE(ct.out.find("gpu_memory_utilization"), std::string::npos) << ct.out;
  EXPECT_NE(ct.out.find(runs_[1]), std::string::npos);
  const std::string page = h_.Dir() + "/compare.html";
  CliResult ch = h_.Cli({"compare", runs_[0], runs_[1], "--format", "html", "-o", page});
  EXPECT_EQ(ch.exit_code, 0) << ch.err;
  const std::string html = ReadAll(page);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u) << html.substr(0, 200);
  EXPECT_NE(html.find(runs_[0]), std::string::npos);

  // Refusals exit 2 and name what to do.
  CliResult probe = h_.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  const std::string probe_run = probe.json().value("run_id", "");
  CliResult mixed = h_.Cli({"compare", runs_[0], probe_run});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.out;
  EXPECT_NE(mixed.err.find("different kinds"), std::string::npos) << mixed.err;
  EXPECT_NE(mixed.err.find(probe_run), std::string::npos) << mixed.err;
  CliResult one = h_.Cli({"compare", runs_[0]});
  EXPECT_EQ(one.exit_code, 2);
  EXPECT_NE(one.err.find("at least 2 runs"), std::string::npos) << one.err;
  CliResult unknown = h_.Cli({"compare", runs_[0], "r-no-such-run"});
  EXPECT_EQ(unknown.exit_code, 2);
}

}  // namespace
}  // namespace npuprof::testing
