// `npuprof advise` of HCCL buffers end to end, and `--kv-cache-memory`: the
// server, local workers, a real loopback sshd and the simulated Ascend
// target, whose HCCL component follows the service's HCCL_BUFFSIZE (fixed
// part + 2 buffers x HCCL_BUFFSIZE MB, tests/sim/README.md).
//   * A memory-profile with `--env HCCL_BUFFSIZE=1000`: `advise` finds
//     hccl_buffers_large with the simulator's HCCL figure, suggests HCCL's
//     default, and `advise --verify --wait` runs the sweep over
//     env.HCCL_BUFFSIZE whose point the simulator's truth puts at the
//     predicted HCCL MB and within 1 % of the predicted KV tokens.
//   * A memory-profile with `--kv-cache-memory N`: vLLM gets the flag, its KV
//     cache is N bytes (the truth), and the spec and manifest record it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class AdviseHcclE2E : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure())
      for (const auto& r : runs_) std::cerr << "events of " << r << ":\n" << h_.Cli({"events", r}).out << std::endl;
    h_.Stop();
  }
  json TruthFor(const std::string& run) {
    for (const auto& t : h_.SimTruthFiles())
      if (t.value("served_model_name", "") == "npuprof-mem-" + run) return t;
    return nullptr;
  }

  NpuprofHarness h_;
  std::vector<std::string> runs_;
};

TEST_F(AdviseHcclE2E, LargeHcclBuffsizeThenVerifiedSweep) {
  ASSERT_TRUE(h_.Start({"--export-delay", "0.3"}, 2).ok());
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  runs_ = {"hc"};

  // A grid key that is not a shell name is refused before anything is sent.
  CliResult bad = h_.Cli({"submit", "sweep", "--kind", "memory-profile", "--machine", "sim1", "--model", model,
                          "--grid", "env.1X=1,2"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("not a shell variable name"), std::string::npos) << bad.err;

  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "1",
                        "--env", "HCCL_BUFFSIZE=1000", "--max-tokens", "8", "--run-id", "hc", "--wait"},
                       200);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json truth = TruthFor("hc");
  ASSERT_TRUE(truth.is_object()) << "no simulator truth for hc";
  EXPECT_EQ(truth["hccl_buffsize_mb"], 1000);
  const double hccl_truth = truth["per_device"]["0"]["components_mb"]["hccl"].get<double>();
  const json man = h_.Cli({"manifest", "hc"}).json();
  EXPECT_EQ(man["env"]["HCCL_BUFFSIZE"], "1000") << man.dump().substr(0, 2000);

  CliResult a = h_.Cli({"advise", "hc"});
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  const json adv = a.json();
  json f;
  for (const auto& x : adv["findings"])
    if (x["rule"] == "hccl_buffers_large") f = x;
  ASSERT_TRUE(f.is_object()) << adv.dump(2);
  EXPECT_EQ(f["cause"], "hccl_buffsize_setting");
  EXPECT_NEAR(f["cause_detail"]["hccl_mb"].get<double>(), hccl_truth, 1e-3) << f.dump(2);
  const json& sug = f["suggestion"];
  EXPECT_EQ(sug["flags"]["env"]["HCCL_BUFFSIZE"], "200") << sug.dump(2);
  ASSERT_TRUE(sug["predicted"]["kv_tokens"].is_number_integer()) << sug.dump(2);
  EXPECT_NE(sug["command"].get<std::string>().find("env.HCCL_BUFFSIZE=200"), std::string::npos) << sug.dump();

  const std::string sweep = sug["verify_run_id"];
  runs_ = {"hc", sweep, sweep + "-p0"};
  CliResult v = h_.Cli({"advise", "hc", "--verify", "--wait"}, 300);
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  const json point = TruthFor(sweep + "-p0");
  ASSERT_TRUE(point.is_object()) << "no simulator truth for " << sweep << "-p0";
  EXPECT_EQ(point["hccl_buffsize_mb"], 200);
  EXPECT_DOUBLE_EQ(point["gpu_memory_utilization"].get<double>(), truth["gpu_memory_utilization"].get<double>());
  EXPECT_NEAR(sug["predicted"]["hccl_mb"].get<double>(), point["per_device"]["0"]["components_mb"]["hccl"].get<double>(),
              1e-3);
  const double actual = point["kv_cache_tokens"].get<double>();
  const double predicted = sug["predicted"]["kv_tokens"].get<double>();
  EXPECT_LE(std::fabs(predicted - actual) / actual, 0.01) << "predicted " << predicted << " truth " << actual;
  json vf;
  const json verified = v.json();
  ASSERT_TRUE(verified.is_object()) << v.out << v.err;
  for (const auto& x : verified["findings"])
    if (x["rule"] == "hccl_buffers_large") vf = x["verification"];
  EXPECT_EQ(vf["status"], "ok") << v.out;
  EXPECT_EQ(vf["matched"], true) << vf.dump(2);
  EXPECT_EQ(vf["points"][0]["measured_kv_tokens"], point["kv_cache_tokens"]);
  EXPECT_EQ(vf["points"][0]["env"]["HCCL_BUFFSIZE"], "200") << vf.dump(2);
}

TEST_F(AdviseHcclE2E, KvCacheMemoryReachesVllm) {
  ASSERT_TRUE(h_.Start({"--export-delay", "0.3"}, 2).ok());
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  runs_ = {"kvm"};
  // --env as serve has it: a name that is not a shell name is refused before anything is recorded.
  CliResult bad = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model, "--env", "1X=2",
                          "--run-id", "badenv"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("env name '1X' is not a shell variable name"), std::string::npos) << bad.err;
  EXPECT_NE(h_.Cli({"show", "badenv"}).exit_code, 0) << "nothing is recorded for a refused spec";
  const int64_t bytes = int64_t{3} << 30;  // 3 GiB
  CliResult r = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "1",
                        "--kv-cache-memory", std::to_string(bytes), "--max-tokens", "8", "--run-id", "kvm", "--wait"},
                       200);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json truth = TruthFor("kvm");
  ASSERT_TRUE(truth.is_object()) << "no simulator truth for kvm";
  EXPECT_EQ(truth["kv_cache_memory_bytes"], bytes);
  const json argv = truth["argv"];
  const auto flag = std::find(argv.begin(), argv.end(), json("--kv-cache-memory"));
  ASSERT_NE(flag, argv.end()) << argv.dump();
  EXPECT_EQ(*(flag + 1), std::to_string(bytes));
  EXPECT_DOUBLE_EQ(truth["per_device"]["0"]["components_mb"]["kv_cache"].get<double>(), bytes / 1048576.0);
  const json man = h_.Cli({"manifest", "kvm"}).json();
  EXPECT_EQ(man["kv_cache_memory"], bytes);
  // The report's KV cache: vLLM's line (2 decimals of GiB) and its token count, as the truth has them.
  json kv;
  for (const auto& c : man["report"]["devices"][0]["components"])
    if (c["key"] == "kv_cache") kv = c;
  ASSERT_TRUE(kv.is_object()) << man["report"].dump().substr(0, 2000);
  EXPECT_NEAR(kv["value_mb"].get<double>(), bytes / 1048576.0, 0.01 * 1024);
  bool tokens = false;
  for (const auto& e : kv["evidence"])
    tokens |= e.value("field", "") == "kv_cache_tokens" && e["value"] == truth["kv_cache_tokens"];
  EXPECT_TRUE(tokens) << kv.dump(2);
}

}  // namespace
}  // namespace npuprof::testing
