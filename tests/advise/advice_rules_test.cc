// The advice rules (statemachine/memory_advice.h) one by one: each fires and
// does not fire at its threshold, names its cause, and predicts with the
// arithmetic vLLM uses; the typed evidence refuses a renamed or mistyped
// field by name; the verification (cli/advice_verify.h) judges within 1 %.
#include <gtest/gtest.h>

#include <set>

#include "cli/advice_verify.h"
#include "statemachine/memory_advice.h"
#include "statemachine/memory_evidence.h"

namespace npuprof::sm {
namespace {

// A failed standalone run on one device of 65536 MB at utilization 0.5:
// vLLM logged `Available KV cache memory: <kv> GiB` and stopped.
json Input(double kv_gib, json baseline_dev = {{"used_mb", 32862}, {"total_mb", 65536}}) {
  return {{"run_id", "r1"},
          {"machine", "sim1"},
          {"status", "failed"},
          {"spec", {{"mode", "standalone"}, {"model", "/m"}, {"gpu_memory_utilization", 0.5}, {"tp", 1}, {"dp", 1},
                    {"max_model_len", 2048}, {"max_tokens", 8}, {"enforce_eager", false}}},
          {"evidence",
           {{"mode", "standalone"}, {"tp", 1}, {"dp", 1}, {"devices", {0}},
            {"baseline", {{"hbm", {{"0", baseline_dev}}}, {"source", "npu_smi"}, {"blob", "b0"},
                          {"file", "baseline_npu_smi.txt"}}},
            {"vllm_log", {{"summary", {{"kv_cache_available_gib", kv_gib}, {"weights_gib", 0.05},
                                       {"evidence", {{"kv_cache_available_gib",
                                                      {{"line", 12}, {"text", "Available KV cache memory"}}}}}}},
                          {"blob", "b1"}, {"file", "vllm_serve.log"}}}}},
          {"model_config", {{"content", {{"num_hidden_layers", 4}, {"num_attention_heads", 28},
                                         {"num_key_value_heads", 4}, {"head_dim", 128}, {"torch_dtype", "bfloat16"}}}}}};
}

MemoryEvidence Decode(const json& in) {
  auto e = DecodeMemoryEvidence(in);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? *e : MemoryEvidence{};
}

json Busy() {
  return {{"used_mb", 32862}, {"total_mb", 65536},
          {"processes", {{{"pid", 1333928}, {"name", "python3"}, {"memory_mb", 30000}}}}};
}

TEST(MemoryEvidence, RefusesAMistypedFieldByName) {
  json in = Input(-0.88);
  in["evidence"]["vllm_log"]["summary"]["kv_cache_available_gib"] = "-0.88";
  auto e = DecodeMemoryEvidence(in);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->errors.size(), 1u);
  EXPECT_EQ(e->errors[0].document, "evidence.vllm_log");
  EXPECT_NE(e->errors[0].message.find("evidence.vllm_log.summary.kv_cache_available_gib must be a number"),
            std::string::npos)
      << e->errors[0].message;
  EXPECT_FALSE(e->vllm_log.present);  // nothing of the document is used
  // The advice then says so and the KV rule, whose evidence it is, finds nothing.
  const json doc = BuildMemoryAdvice(in);
  EXPECT_EQ(doc["status"], "partial");
  EXPECT_EQ(doc["evidence_errors"][0]["path"], "evidence.vllm_log.summary.kv_cache_available_gib");
  EXPECT_TRUE(doc["findings"].empty());
  // A spec that is not an object still makes the whole input unreadable.
  in["spec"] = "standalone";
  EXPECT_EQ(BuildMemoryAdvice(in)["status"], "unreadable");
}

TEST(MemoryEvidence, OneMalformedDocumentLeavesTheOtherRulesTheirFindings) {
  // A KV finding (vLLM log), a residual finding (components + msprof) and a
  // weights finding (weight manifest); then the msprof document is malformed.
  json in = Input(-0.88, Busy());
  in["components_mb"] = {{"0", {{"residual", 250.0}}}};
  in["evidence"]["msprof"] = {{"status", "ok"},
                              {"module_mem", {{{"component", "HCCL"}, {"max_mb", 597.6}, {"device_id", 0}}}}};
  in["evidence"]["weights"] = {{"per_device_bytes", 40.0 * 1024 * 1024}, {"blob", "w"}};
  auto rules = [](const json& doc) {
    std::set<std::string> out;
    for (const auto& f : doc["findings"]) out.insert(f["rule"].get<std::string>());
    return out;
  };
  const json good = BuildMemoryAdvice(in);
  EXPECT_EQ(good["status"], "ok");
  EXPECT_FALSE(good.contains("evidence_errors"));
  EXPECT_EQ(rules(good), (std::set<std::string>{"kv_cache_low", "residual_large", "weights_vs_safetensors"}));
  in["evidence"]["msprof"]["module_mem"][0]["max_mb"] = "597.6";
  const json bad = BuildMemoryAdvice(in);
  EXPECT_EQ(bad["status"], "partial");
  ASSERT_EQ(bad["evidence_errors"].size(), 1u) << bad.dump(2);
  EXPECT_EQ(bad["evidence_errors"][0]["document"], "evidence.msprof");
  EXPECT_EQ(bad["evidence_errors"][0]["path"], "evidence.msprof.module_mem[0].max_mb");
  // The residual rule needs msprof: no finding; the others keep theirs.
  EXPECT_EQ(rules(bad), (std::set<std::string>{"kv_cache_low", "weights_vs_safetensors"}));
  // A malformed model config: listed; the KV rule falls back to what the run measured.
  in["model_config"] = {{"content", {{"num_hidden_layers", "four"}}}};
  const json mc = BuildMemoryAdvice(in);
  bool listed = false;
  for (const auto& err : mc["evidence_errors"]) listed |= err["document"] == "model_config";
  EXPECT_TRUE(listed) << mc.dump(2);
  EXPECT_TRUE(rules(mc).count("kv_cache_low"));
}

TEST(MemoryEvidence, RenamedKeyIsAbsentNotAFinding) {
  json in = Input(-0.88);
  in["evidence"]["vllm_log"]["summary"].erase("kv_cache_available_gib");
  in["evidence"]["vllm_log"]["summary"]["kv_cache_gib_available"] = -0.88;
  EXPECT_TRUE(RuleKvCacheLow(Decode(in)).empty());
}

TEST(KvCacheLow, FiresBelowTheThresholdOnly) {
  EXPECT_EQ(RuleKvCacheLow(Decode(Input(kKvLowGib - 0.01))).size(), 1u);
  EXPECT_TRUE(RuleKvCacheLow(Decode(Input(kKvLowGib))).empty());
  const auto f = RuleKvCacheLow(Decode(Input(-0.88)));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, "critical");
  EXPECT_EQ(f[0].suggestion.sweep_args.size() > 0, true);
}

TEST(KvCacheLow, NamesAnotherProcessOnTheLeasedDevice) {
  const auto f = RuleKvCacheLow(Decode(Input(-0.88, Busy())));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "other_process_hbm");
  EXPECT_EQ(f[0].cause_detail["processes"][0]["pid"], 1333928);
  EXPECT_NE(f[0].explanation.find("pid 1333928 (30000 MB on device 0)"), std::string::npos) << f[0].explanation;
  bool cites_log = false;
  for (const auto& r : f[0].evidence) cites_log |= r.field == "kv_cache_available_gib" && r.line == 12;
  EXPECT_TRUE(cites_log);
}

TEST(KvCacheLow, OtherCauses) {
  // HBM held with no process listed (another container).
  auto f = RuleKvCacheLow(Decode(Input(-0.88)));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "baseline_hbm_unlisted");
  // A quiet baseline: the utilization's budget.
  f = RuleKvCacheLow(Decode(Input(-0.88, {{"used_mb", 2862}, {"total_mb", 65536}})));
  EXPECT_EQ(f[0].cause, "utilization_budget");
  // Graph capture larger than the KV cache.
  json in = Input(0.4, {{"used_mb", 2862}, {"total_mb", 65536}});
  in["evidence"]["vllm_log"]["summary"]["graph_capture_gib"] = 0.6;
  f = RuleKvCacheLow(Decode(in));
  EXPECT_EQ(f[0].cause, "graph_capture");
}

TEST(KvCacheLow, PredictsTheLargestSafeUtilizationAndItsTokens) {
  const auto f = RuleKvCacheLow(Decode(Input(-0.88, Busy())));
  ASSERT_EQ(f.size(), 1u);
  const auto& s = f[0].suggestion;
  // (65536 - 1024 graph allowance - 1024 headroom) / 65536 = 0.968 -> 0.96, capped at 0.95.
  EXPECT_DOUBLE_EQ(s.flags["gpu_memory_utilization"].get<double>(), 0.95);
  // KV moves by (0.95 - 0.5) x 65536 MB: -901.12 + 29491.2 = 28590.08 MB -> 27.92 GiB as vLLM prints it.
  EXPECT_DOUBLE_EQ(s.predicted["kv_cache_gib"].get<double>(), 27.92);
  // 2 x 4 layers x 4 kv heads x 128 x 2 bytes = 8192 bytes per token; whole blocks of 128.
  EXPECT_EQ(s.basis["bytes_per_token"], 8192);
  EXPECT_EQ(s.predicted["kv_tokens"], 3659520);
  EXPECT_EQ(s.verify_run_id, "r1-adv-kv");
  const auto& a = s.sweep_args;
  EXPECT_NE(std::find(a.begin(), a.end(), "gpu-memory-utilization=0.95"), a.end());
  EXPECT_NE(std::find(a.begin(), a.end(), "--advice"), a.end());
}

TEST(KvCacheLow, ArithmeticHelpers) {
  EXPECT_DOUBLE_EQ(LargestSafeUtilization(32768, 2048), 0.9);  // (32768 - 2048 - 1024) / 32768 = 0.906
  EXPECT_DOUBLE_EQ(LargestSafeUtilization(32768, 0), kMaxSafeUtilization);  // 0.968 capped
  EXPECT_DOUBLE_EQ(FloorCenti(0.95), 0.95);
  EXPECT_EQ(KvTokensOf(100, 8192), 131072);  // 1 GiB / 8192 = 131072 tokens, 1024 blocks
  EXPECT_EQ(KvTokensOf(-5, 8192), 0);
  ModelConfigEvidence mla;
  mla.present = true;
  mla.num_hidden_layers = 8;
  mla.kv_lora_rank = 512;
  mla.qk_rope_head_dim = 64;
  EXPECT_EQ(KvBytesPerToken(mla, 4), (512 + 64) * 8 * 2);
  EXPECT_EQ(AdviceVerifyRunId(std::string(64, 'a'), "kv_cache_low").size(), 58u);
}

json Ready(double used, double infer) {
  json in = Input(20.0, {{"used_mb", 2862}, {"total_mb", 65536}});
  in["evidence"]["after_ready"] = {{"hbm", {{"0", {{"used_mb", used}, {"total_mb", 65536}}}}}, {"blob", "r"}};
  in["evidence"]["after_infer"] = {{"hbm", {{"0", {{"used_mb", infer}, {"total_mb", 65536}}}}}, {"blob", "i"}};
  return in;
}

TEST(ActivationHeadroom, FiresWhenOneMorePeakDoesNotFit) {
  // 2000 MB activation, 65536 - 62000 - 2000 = 1536 MB free at the peak.
  auto f = RuleActivationHeadroom(Decode(Ready(62000, 64000)));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(f[0].cause_detail["headroom_mb"].get<double>(), 1536);
  // needs 2000 - 1536 = 464 MB more: 0.5 - 464/65536 = 0.4929 -> 0.49
  EXPECT_DOUBLE_EQ(f[0].suggestion.flags["gpu_memory_utilization"].get<double>(), 0.49);
  // 2000 MB free at the peak: no finding.
  EXPECT_TRUE(RuleActivationHeadroom(Decode(Ready(61536, 63536))).empty());
}

TEST(WeightsVsSafetensors, TwoPercent) {
  json in = Input(20.0, {{"used_mb", 2862}, {"total_mb", 65536}});
  const double st_bytes = 1000.0 * 1024 * 1024;
  in["evidence"]["weights"] = {{"per_device_bytes", st_bytes}, {"blob", "w"}, {"file", "weight_manifest.json"}};
  in["evidence"]["vllm_log"]["summary"]["weights_gib"] = 1025.0 / 1024;  // +2.5 %
  auto f = RuleWeightsVsSafetensors(Decode(in));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].cause, "loaded_more_than_files");
  in["evidence"]["vllm_log"]["summary"]["weights_gib"] = 1015.0 / 1024;  // +1.5 %
  EXPECT_TRUE(RuleWeightsVsSafetensors(Decode(in)).empty());
}

TEST(ResidualLarge, OverTwoHundredMbWithMsprof) {
  json in = Input(20.0, {{"used_mb", 2862}, {"total_mb", 65536}});
  in["components_mb"] = {{"0", {{"residual", 250.0}}}};
  EXPECT_TRUE(RuleResidualLarge(Decode(in)).empty());  // no msprof: the residual holds HCCL too
  in["evidence"]["msprof"] = {{"status", "ok"},
                              {"module_mem", {{{"component", "HCCL"}, {"max_mb", 597.6}, {"device_id", 0}}}}};
  EXPECT_EQ(RuleResidualLarge(Decode(in)).size(), 1u);
  in["components_mb"]["0"]["residual"] = 200.0;
  EXPECT_TRUE(RuleResidualLarge(Decode(in)).empty());
}

}  // namespace
}  // namespace npuprof::sm

namespace npuprof::cli {
namespace {

json ChildManifest(int64_t tokens) {
  return {{"run_id", "r1-adv-kv-p0"},
          {"status", "ok"},
          {"gpu_memory_utilization", 0.95},
          {"report", {{"devices", {{{"device_id", 0},
                                    {"components", {{{"key", "kv_cache"}, {"value_mb", 28590.08},
                                                     {"evidence", {{{"field", "kv_cache_tokens"},
                                                                    {"value", tokens}}}}}}}}}}}}};
}

TEST(AdviceVerify, MatchedWithinOnePercent) {
  const json finding = {{"rule", "kv_cache_low"}, {"suggestion", {{"verify_run_id", "r1-adv-kv"}}}};
  const json sweep = {{"status", "ok"},
                      {"advice", {{"run_id", "r1"}, {"rule", "kv_cache_low"}, {"device", 0},
                                  {"predicted", {{"kv_tokens", 1000000}}}}}};
  json v = VerifyFinding(finding, "r1", sweep, {ChildManifest(1009000)});
  EXPECT_EQ(v["matched"], true) << v.dump();
  v = VerifyFinding(finding, "r1", sweep, {ChildManifest(1011000)});
  EXPECT_EQ(v["matched"], false) << v.dump();
  EXPECT_EQ(VerifyFinding(finding, "r1", nullptr, {})["status"], "not_run");
  EXPECT_EQ(VerifyFinding(finding, "r2", sweep, {})["status"], "mismatch_advice");
  const json running = {{"status", "running"}, {"advice", sweep["advice"]}};
  EXPECT_TRUE(VerifyFinding(finding, "r1", running, {})["matched"].is_null());
}

}  // namespace
}  // namespace npuprof::cli
