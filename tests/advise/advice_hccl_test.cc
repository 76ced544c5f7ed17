// The hccl_buffers_large rule (statemachine/memory_advice.h): it fires when
// the whole HCCL_BUFFSIZE buffers the measured HCCL component holds take more
// than kHcclBuffersPctOfHbm of the device's HBM, not at or below it, and not
// without msprof's HCCL figure; its remedy frees buffers x (size - suggested)
// MB, which vLLM's budget gives to the KV cache; the verification judges the
// measured HCCL too (cli/advice_verify.h). And kv_cache_low's alternative:
// the same KV cache as vLLM's --kv-cache-memory bytes.
#include <gtest/gtest.h>

#include <algorithm>

#include "cli/advice_verify.h"
#include "cli/env_option.h"
#include "statemachine/memory_advice.h"
#include "statemachine/memory_evidence.h"

namespace npuprof::sm {
namespace {

// A finished standalone run on one 65536 MB device at utilization 0.85 with
// HCCL_BUFFSIZE `size` ("" = unset) and msprof's HCCL component `hccl_mb`.
json Input(const std::string& size, std::optional<double> hccl_mb) {
  json env = json::object();
  if (!size.empty()) env["HCCL_BUFFSIZE"] = size;
  json in = {{"run_id", "r1"},
             {"machine", "sim1"},
             {"status", "ok"},
             {"spec", {{"mode", "standalone"}, {"model", "/m"}, {"gpu_memory_utilization", 0.85}, {"tp", 1},
                       {"dp", 1}, {"max_model_len", 2048}, {"env", env}}},
             {"evidence",
              {{"mode", "standalone"}, {"tp", 1}, {"dp", 1}, {"devices", {0}},
               {"after_ready", {{"hbm", {{"0", {{"used_mb", 56000}, {"total_mb", 65536}}}}}, {"blob", "r"},
                                {"file", "after_ready_npu_smi.txt"}}},
               {"vllm_log", {{"summary", {{"kv_cache_available_gib", 42.0}, {"kv_cache_tokens", 5505024}}},
                             {"blob", "b1"}, {"file", "vllm_serve.log"}}}}},
             {"model_config", {{"content", {{"num_hidden_layers", 4}, {"num_attention_heads", 28},
                                            {"num_key_value_heads", 4}, {"head_dim", 128},
                                            {"torch_dtype", "bfloat16"}}}}}};
  if (hccl_mb)
    in["evidence"]["msprof"] = {{"status", "ok"},
                                {"module_mem", {{{"component", "HCCL"}, {"max_mb", *hccl_mb}, {"device_id", 0},
                                                 {"file", "npu_module_mem.csv"}, {"blob", "m"}, {"row", 7}}}}};
  return in;
}

MemoryEvidence Decode(const json& in) {
  auto e = DecodeMemoryEvidence(in);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? *e : MemoryEvidence{};
}

TEST(HcclBuffersLarge, FiresWhenTheBuffersTakeMoreThanTheirShare) {
  // 202400 KB fixed + 2 x 1000 MB: 2 buffers of 1000 MB = 3.05 % of 65536 MB.
  const double hccl = 202400 / 1024.0 + 2000;
  const auto f = RuleHcclBuffersLarge(Decode(Input("1000", hccl)));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "hccl_buffsize_setting");
  EXPECT_EQ(f[0].cause_detail["buffers"], 2);
  EXPECT_EQ(f[0].suggestion.flags["env"]["HCCL_BUFFSIZE"], "200");
  // 2 x (1000 - 200) MB freed.
  EXPECT_DOUBLE_EQ(f[0].suggestion.predicted["hccl_freed_mb"].get<double>(), 1600);
  EXPECT_NEAR(f[0].suggestion.predicted["hccl_mb"].get<double>(), 202400 / 1024.0 + 400, 1e-3);
  // 42 GiB + 1600 MB = 43.5625 GiB -> 43.56 as vLLM prints it; 8192 bytes a token.
  EXPECT_DOUBLE_EQ(f[0].suggestion.predicted["kv_cache_gib"].get<double>(), 43.56);
  EXPECT_EQ(f[0].suggestion.predicted["kv_tokens"], KvTokensOf(4356, 8192));
  bool cites_row = false;
  for (const auto& r : f[0].evidence) cites_row |= r.field == "hccl_mb" && r.row == 7 && r.device == 0;
  EXPECT_TRUE(cites_row);
  const auto& a = f[0].suggestion.sweep_args;
  EXPECT_NE(std::find(a.begin(), a.end(), "env.HCCL_BUFFSIZE=200"), a.end());
  // The run's own utilization goes with the sweep (only HCCL_BUFFSIZE varies).
  auto u = std::find(a.begin(), a.end(), "--gpu-memory-utilization");
  ASSERT_NE(u, a.end());
  EXPECT_EQ(*(u + 1), "0.85");
  EXPECT_EQ(f[0].suggestion.verify_run_id, "r1-adv-hccl");
}

// A multi-node run's remedy sweep spans the same nodes: --node per node,
// head first, with the NPUs its spec asked for there, and the deployment's
// dp (not the head's share), the dp address and port it was given.
TEST(HcclBuffersLarge, AMultiNodeRunsSweepSpansItsNodes) {
  json in = Input("1000", 202400 / 1024.0 + 2000);
  in["machine"] = "head";
  in["spec"]["dp"] = 2;
  in["spec"]["nodes"] = json::array({{{"machine", "head"}}, {{"machine", "worker"}, {"devices", {2, 3}}}});
  in["spec"]["dp_address"] = "10.0.0.1";
  in["evidence"]["machine"] = "head";
  const auto f = RuleHcclBuffersLarge(Decode(in));
  ASSERT_EQ(f.size(), 1u);
  const auto& a = f[0].suggestion.sweep_args;
  std::vector<std::string> nodes;
  for (size_t i = 0; i + 1 < a.size(); ++i)
    if (a[i] == "--node") nodes.push_back(a[i + 1]);
  EXPECT_EQ(nodes, (std::vector<std::string>{"head", "worker:2,3"}));
  EXPECT_EQ(std::find(a.begin(), a.end(), "--machine"), a.end());
  EXPECT_EQ(std::find(a.begin(), a.end(), "--devices"), a.end());
  auto dp = std::find(a.begin(), a.end(), "--dp");
  ASSERT_NE(dp, a.end());
  EXPECT_EQ(*(dp + 1), "2");
  auto addr = std::find(a.begin(), a.end(), "--dp-address");
  ASSERT_NE(addr, a.end());
  EXPECT_EQ(*(addr + 1), "10.0.0.1");
  // A node list that is not a list of {machine} is an error naming the path.
  in["spec"]["nodes"] = json::array({{{"devices", {0}}}});
  auto bad = DecodeMemoryEvidence(in);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nodes[0].machine"), std::string::npos) << bad.status().message();
}

TEST(HcclBuffersLarge, DoesNotFireAtTheDefaultOrBelowTheShare) {
  // The default (unset = 200 MB): 2 buffers = 400 MB, 0.6 % of HBM.
  EXPECT_TRUE(RuleHcclBuffersLarge(Decode(Input("", 202400 / 1024.0 + 400))).empty());
  // 2 x 600 MB = 1.83 %: below 2 %.
  EXPECT_TRUE(RuleHcclBuffersLarge(Decode(Input("600", 197.66 + 1200))).empty());
  // At the default with many domains: 8 buffers of 200 MB = 2.4 % fires, suggesting 100.
  const auto f = RuleHcclBuffersLarge(Decode(Input("", 197.66 + 1600)));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "hccl_default_buffsize");
  EXPECT_EQ(f[0].suggestion.flags["env"]["HCCL_BUFFSIZE"], "100");
}

TEST(HcclBuffersLarge, MissingOrUnusableEvidenceGivesNoFinding) {
  EXPECT_TRUE(RuleHcclBuffersLarge(Decode(Input("1000", std::nullopt))).empty());  // no msprof
  EXPECT_TRUE(RuleHcclBuffersLarge(Decode(Input("lots", 2197.66))).empty());       // not a number of MB
  json in = Input("1000", 2197.66);
  in["evidence"].erase("after_ready");  // no HBM total
  EXPECT_TRUE(RuleHcclBuffersLarge(Decode(in)).empty());
}

TEST(KvCacheLowAlternative, TheSameKvCacheAsKvCacheMemoryBytes) {
  json in = Input("", std::nullopt);
  in["evidence"]["vllm_log"]["summary"] = {{"kv_cache_available_gib", 0.5}};
  in["evidence"]["baseline"] = {{"hbm", {{"0", {{"used_mb", 2862}, {"total_mb", 65536}}}}}, {"blob", "b0"}};
  const auto f = RuleKvCacheLow(Decode(in));
  ASSERT_EQ(f.size(), 1u);
  const auto& s = f[0].suggestion;
  ASSERT_EQ(s.alternatives.size(), 1u) << f[0].ToJson().dump(2);
  const json& alt = s.alternatives[0];
  const int64_t centi = static_cast<int64_t>(s.predicted["kv_cache_gib"].get<double>() * 100 + 0.5);
  EXPECT_EQ(alt["flags"]["kv_cache_memory"], centi * (int64_t{1} << 30) / 100);
  EXPECT_EQ(alt["predicted"]["kv_tokens"], s.predicted["kv_tokens"]);
  EXPECT_TRUE(f[0].ToJson()["suggestion"].contains("alternatives"));
  // A run whose KV cache is fixed by --kv-cache-memory: no utilization change (vLLM ignores it).
  in["spec"]["kv_cache_memory"] = int64_t{1} << 29;
  const auto g = RuleKvCacheLow(Decode(in));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_TRUE(g[0].suggestion.flags.empty());
  EXPECT_TRUE(g[0].suggestion.sweep_args.empty());
  EXPECT_NE(g[0].suggestion.note.find("--kv-cache-memory"), std::string::npos) << g[0].suggestion.note;
}

}  // namespace
}  // namespace npuprof::sm

namespace npuprof::cli {
namespace {

json Child(double hccl_mb) {
  return {{"run_id", "r1-adv-hccl-p0"},
          {"status", "ok"},
          {"env", {{"HCCL_BUFFSIZE", "200"}}},
          {"report", {{"devices", {{{"device_id", 0},
                                    {"components", {{{"key", "kv_cache"}, {"value_mb", 44605.44},
                                                     {"evidence", {{{"field", "kv_cache_tokens"}, {"value", 5709824}}}}},
                                                    {{"key", "hccl"}, {"value_mb", hccl_mb}}}}}}}}}};
}

TEST(AdviceVerifyHccl, JudgesTheHcclComponentToo) {
  const json finding = {{"rule", "hccl_buffers_large"}, {"suggestion", {{"verify_run_id", "r1-adv-hccl"}}}};
  const json sweep = {{"status", "ok"},
                      {"advice", {{"run_id", "r1"}, {"rule", "hccl_buffers_large"}, {"device", 0},
                                  {"predicted", {{"kv_tokens", 5709824}, {"hccl_mb", 597.656}}}}}};
  json v = VerifyFinding(finding, "r1", sweep, {Child(597.656)});
  EXPECT_EQ(v["matched"], true) << v.dump();
  EXPECT_EQ(v["points"][0]["env"]["HCCL_BUFFSIZE"], "200");
  // The KV cache as predicted but HCCL did not move: not matched.
  v = VerifyFinding(finding, "r1", sweep, {Child(2197.656)});
  EXPECT_EQ(v["matched"], false) << v.dump();
}

TEST(EnvOption, FlagsAndGridKeys) {
  auto env = EnvFromFlags({"HCCL_BUFFSIZE=200", "A=b=c"});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ((*env)["HCCL_BUFFSIZE"], "200");
  EXPECT_EQ((*env)["A"], "b=c");
  auto bad = EnvFromFlags({"HCCL_BUFFSIZE"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not KEY=VALUE"), std::string::npos);
  EXPECT_TRUE(IsEnvGridKey("env.HCCL_BUFFSIZE"));
  EXPECT_FALSE(IsEnvGridKey("tp"));
  EXPECT_EQ(*EnvGridName("env.HCCL_BUFFSIZE"), "HCCL_BUFFSIZE");
  for (const char* k : {"env.", "env.1X", "env.A-B", "env.A B"}) {
    auto n = EnvGridName(k);
    ASSERT_FALSE(n.ok()) << k;
    EXPECT_NE(n.status().message().find("not a shell variable name"), std::string::npos) << n.status().message();
  }
}

}  // namespace
}  // namespace npuprof::cli
