// Pure report builder: every component rule of docs/BEHAVIOUR.md#mem-components,
// with and without msprof, attach without baseline, and the residual rule (#mem-residual).
#include <gtest/gtest.h>

#include "statemachine/memory_report.h"
#include "statemachine/memory_report_text.h"

namespace npuprof::sm {
namespace {

json Snap(double used0, double used1, const char* blob, const char* file) {
  return {{"hbm", {{"0", {{"used_mb", used0}, {"total_mb", 65536}}}, {"1", {{"used_mb", used1}, {"total_mb", 65536}}}}},
          {"blob", blob}, {"file", file}, {"source", "npu_smi"}};
}

// Two devices; components per device: fixed 2862, weights 7.0927 GiB, KV 46.78 GiB,
// graph 0.49 GiB, HCCL 597.65625, RUNTIME 125.2998..., SLOG 6, FMK 3.125, DEVMM 0.25,
// activation 180, true residual 37.
json Evidence(bool with_msprof) {
  const double weights = 7.0927 * 1024, kv = 46.78 * 1024, graph = 0.49 * 1024;
  const double hccl = 612000 / 1024.0, runtime = 128307 / 1024.0, slog = 6.0, fmk = 3.125, devmm = 0.25;
  const double ready = 2862 + weights + kv + graph + hccl + runtime + slog + fmk + devmm + 37;
  json ev = {{"mode", "standalone"}, {"tp", 2}, {"dp", 1}, {"devices", {0, 1}}};
  ev["baseline"] = Snap(2862, 2862, "b0", "baseline_npu_smi.txt");
  ev["after_ready"] = Snap(ready, ready, "r0", "after_ready_npu_smi.txt");
  ev["after_infer"] = Snap(ready + 180, ready + 180, "i0", "after_infer_npu_smi.txt");
  json summary = {{"weights_gib", 7.0927}, {"kv_cache_available_gib", 46.78}, {"kv_cache_tokens", 1751808},
                  {"graph_capture_gib", 0.49}, {"graph_capture_count", 1},
                  {"evidence", {{"weights_gib", {{"line", 12}, {"text", "Loading model weights took 7.0927 GB"}}},
                                {"kv_cache_available_gib", {{"line", 30}, {"text", "Available KV cache memory: 46.78 GiB"}}}}},
                  {"ranks", {{"Worker_TP1 pid=9", {{"weights_gib", 7.0927},
                                                   {"evidence", {{"weights_gib", {{"line", 13}, {"text", "w1"}}}}}}}}}};
  ev["vllm_log"] = {{"summary", summary}, {"blob", "l0"}, {"file", "vllm_serve.log"}};
  ev["weights"] = {{"per_device_bytes", 7615691776.0}, {"total_bytes", 15230974976.0}, {"blob", "w0"},
                   {"file", "weight_manifest.json"}, {"tp", 2}, {"dp", 1}, {"ep", 2},
                   {"categories", json::array({{{"category", "embedding"}, {"display_name", "Embedding"},
                                                {"total_bytes", 1089994752}, {"per_device_bytes", 544997376},
                                                {"share_of_per_device", 0.07}, {"dtypes", {"BF16"}}}})}};
  if (with_msprof) {
    json mm = json::array();
    for (int d : {0, 1})
      for (auto [c, v] : std::vector<std::pair<const char*, double>>{
               {"SLOG", slog}, {"HCCL", hccl}, {"FMK", fmk}, {"RUNTIME", runtime}, {"DRV", 0}, {"DEVMM", devmm}})
        mm.push_back({{"file", "npu_module_mem_20260101.csv"}, {"blob", "c" + std::to_string(d)}, {"component", c},
                      {"device_id", d}, {"max_mb", v}, {"row", 3}, {"raw", "1"}, {"scope", "device"}});
    ev["msprof"] = {{"status", "ok"}, {"module_mem", mm},
                    {"npu_mem", json::array({{{"file", "npu_mem_1.csv"}, {"event", "APP"}, {"device_id", 0},
                                              {"max_hbm_mb", 55000.0}, {"row", 9}}})}};
  }
  return ev;
}

const json& Comp(const json& report, int dev, const std::string& key) {
  for (const auto& c : report["devices"][dev]["components"])
    if (c["key"] == key) return c;
  static const json kNone;
  ADD_FAILURE() << "no component " << key;
  return kNone;
}

double V(const json& report, int dev, const std::string& key) { return Comp(report, dev, key)["value_mb"].get<double>(); }

TEST(MemoryReport, WithMsprofEveryComponentFromItsSource) {
  const json r = BuildMemoryReport(Evidence(true));
  ASSERT_EQ(r["devices"].size(), 2u);
  for (int d : {0, 1}) {
    EXPECT_NEAR(V(r, d, "fixed_overhead"), 2862, 1e-6);
    EXPECT_NEAR(V(r, d, "weights"), 7.0927 * 1024, 1e-3);
    EXPECT_EQ(Comp(r, d, "weights")["source"], "vllm_log");
    EXPECT_NEAR(V(r, d, "kv_cache"), 46.78 * 1024, 1e-3);
    EXPECT_NEAR(V(r, d, "graph_capture"), 0.49 * 1024, 1e-3);
    EXPECT_NEAR(V(r, d, "hccl"), 597.656, 1e-3);
    EXPECT_NEAR(V(r, d, "runtime"), 125.3, 1e-2);
    EXPECT_NEAR(V(r, d, "slog"), 6, 1e-6);
    EXPECT_NEAR(V(r, d, "msprof_other"), 3.125, 1e-6);  // FMK only: DEVMM 0.25 <= 0.5, DRV 0
    EXPECT_NEAR(V(r, d, "activation_peak"), 180, 1e-3);
    EXPECT_NEAR(V(r, d, "residual"), 37.25, 1e-2);
    EXPECT_EQ(Comp(r, d, "residual")["status"], "unattributed");
    EXPECT_EQ(Comp(r, d, "residual")["label_zh"], "未归因残差");
    EXPECT_EQ(r["devices"][d]["msprof_scope"], "device");
    // Every component has its evidence and a percentage.
    for (const auto& c : r["devices"][d]["components"]) {
      EXPECT_TRUE(c["percent"].is_number()) << c.dump();
      EXPECT_FALSE(c["evidence"].empty()) << c.dump();
    }
  }
  // Rank 1's own weights line is its evidence.
  EXPECT_EQ(Comp(r, 1, "weights")["evidence"][0]["line"], 13);
  EXPECT_EQ(Comp(r, 0, "weights")["evidence"][0]["line"], 12);
  // Corroboration: safetensors per-device value and its % difference.
  const json& cor = Comp(r, 0, "weights")["corroboration"];
  ASSERT_EQ(cor.size(), 1u);
  EXPECT_EQ(cor[0]["source"], "safetensors");
  EXPECT_NEAR(cor[0]["value_mb"].get<double>(), 7262.89, 0.01);
  // Cross-validation.
  const json& xv = r["devices"][0]["cross_validation"];
  EXPECT_NEAR(xv["unattributed_mb"].get<double>(), 37.25, 1e-2);
  EXPECT_TRUE(xv["component_sum_within_5pct"].get<bool>());
  EXPECT_NEAR(xv["msprof_app_mb"].get<double>(), 55000, 1e-6);
  EXPECT_TRUE(xv.contains("app_minus_weights_kv_mb"));
  EXPECT_EQ(r["msprof"]["available"], true);
  EXPECT_TRUE(r["weights_breakdown"].is_object());
}

TEST(MemoryReport, WithoutMsprofResidualIsLabelledAndNotSplit) {
  const json r = BuildMemoryReport(Evidence(false));
  for (const char* k : {"hccl", "runtime", "slog", "msprof_other"}) {
    EXPECT_TRUE(Comp(r, 0, k)["value_mb"].is_null()) << k;
    EXPECT_EQ(Comp(r, 0, k)["status"], "unavailable");
  }
  const json& res = Comp(r, 0, "residual");
  EXPECT_EQ(res["status"], "unattributed_msprof_missing");
  EXPECT_EQ(res["label_zh"], "未归因 (缺少 msprof 数据)");
  EXPECT_EQ(res["label_en"], "Unattributed (msprof data missing)");
  // HCCL + RUNTIME + SLOG + FMK + DEVMM + 37 stay in the residual.
  EXPECT_NEAR(res["value_mb"].get<double>(), 597.65625 + 128307 / 1024.0 + 6 + 3.125 + 0.25 + 37, 1e-2);
  EXPECT_EQ(r["devices"][0]["msprof_scope"], "none");
  EXPECT_FALSE(r["devices"][0]["cross_validation"].contains("msprof_app_mb"));
}

TEST(MemoryReport, AttachWithoutBaselineSaysUnavailable) {
  json ev = Evidence(true);
  ev["mode"] = "attach";
  ev.erase("baseline");
  const json r = BuildMemoryReport(ev);
  const json& fixed = Comp(r, 0, "fixed_overhead");
  EXPECT_TRUE(fixed["value_mb"].is_null());
  EXPECT_EQ(fixed["status"], "unavailable");
  EXPECT_NE(fixed["note"].get<std::string>().find("--baseline-from"), std::string::npos);
  EXPECT_NEAR(V(r, 0, "residual"), 37.25 + 2862, 1e-2);  // never guessed: the overhead stays unattributed
}

TEST(MemoryReport, ResidualIsNotDrivenNegativeByTheActivation) {
  // Subtracting the activation (after inference) from the after-ready total would
  // give 37.25 - 180 < 0 (docs/BEHAVIOUR.md#mem-residual); the report uses after-inference used.
  const json r = BuildMemoryReport(Evidence(true));
  EXPECT_GT(V(r, 0, "residual"), 0);
  EXPECT_NEAR(V(r, 0, "residual"), 37.25, 1e-2);
  double sum = 0;
  for (const auto& c : r["devices"][0]["components"]) sum += c["value_mb"].get<double>();
  EXPECT_NEAR(sum, r["devices"][0]["hbm_used_mb"].get<double>(), 1e-2);
  EXPECT_EQ(r["devices"][0]["hbm_used_phase"], "after_infer");
}

TEST(MemoryReport, ActivationNeverNegative) {
  json ev = Evidence(true);
  ev["after_infer"]["hbm"]["0"]["used_mb"] = ev["after_ready"]["hbm"]["0"]["used_mb"].get<double>() - 10;
  const json r = BuildMemoryReport(ev);
  EXPECT_EQ(V(r, 0, "activation_peak"), 0);
}

// The collect step's series peak for both devices (statemachine/activation_peak.h's JSON form).
json SeriesPeaks(bool ok, double value) {
  json rows = json::array();
  for (int d : {0, 1}) {
    json p = {{"device_id", d}, {"file", "npu_mem_1.csv"}, {"blob", "s" + std::to_string(d)}, {"event", "Device"},
              {"clock", "target"}, {"ok", ok}, {"reason", ok ? "" : "gap"},
              {"message", ok ? "" : "the series has a gap of 900000 us"},
              {"value_mb", ok ? json(value) : json(nullptr)}, {"peak_mb", 60000.0 + value},
              {"base_mb", ok ? json(60000.0) : json(nullptr)},
              {"peak", {{"t_us", 1.7e15}, {"mb", 60000.0 + value}, {"row", 41}}}, {"base_rows", {30, 31}},
              {"window", {{"start_us", 1.7e15 - 2e5}, {"end_us", 1.7e15 + 5e5}}}, {"window_rows", {35, 50}}};
    rows.push_back(p);
  }
  return rows;
}

TEST(MemoryReport, SeriesPeakIsTheActivationWhenTheAllocatorReleasedIt) {
  // Released: npu-smi after inference shows the after-ready level again (delta 0);
  // the series saw 180 MB. The residual is taken at the inference peak.
  json ev = Evidence(true);
  ev["after_infer"] = ev["after_ready"];
  ev["after_infer"]["blob"] = "i0";
  ev["msprof"]["activation_peaks"] = SeriesPeaks(true, 180);
  const json r = BuildMemoryReport(ev);
  for (int d : {0, 1}) {
    const json& act = Comp(r, d, "activation_peak");
    EXPECT_NEAR(act["value_mb"].get<double>(), 180, 1e-9);
    EXPECT_EQ(act["source"], "series");
    EXPECT_EQ(act["evidence"][0]["file"], "msprof_csvs/npu_mem_1.csv");
    EXPECT_EQ(act["evidence"][0]["row"], 41);
    EXPECT_EQ(act["evidence"][0]["blob"], "s" + std::to_string(d));
    ASSERT_EQ(act["corroboration"].size(), 1u);
    EXPECT_EQ(act["corroboration"][0]["source"], "npu_smi_delta");
    EXPECT_EQ(act["corroboration"][0]["value_mb"], 0);
    EXPECT_NEAR(V(r, d, "residual"), 37.25, 1e-2);
    EXPECT_EQ(r["devices"][d]["hbm_used_phase"], "inference_peak");
    double sum = 0;
    for (const auto& c : r["devices"][d]["components"]) sum += c["value_mb"].get<double>();
    EXPECT_NEAR(sum, r["devices"][d]["hbm_used_mb"].get<double>(), 1e-2);
    const json& xv = r["devices"][d]["cross_validation"];
    EXPECT_NEAR(xv["inference_peak_used_mb"].get<double>(), xv["npu_smi_used_mb"].get<double>() + 180, 1e-2);
  }
  const std::string text = RenderMemoryReportText(r, "en");
  EXPECT_NE(text.find("msprof npu_mem series"), std::string::npos);
  EXPECT_NE(text.find("inference_peak"), std::string::npos);
}

TEST(MemoryReport, SeriesPeakAndSnapshotAgreeWhenRetained) {
  json ev = Evidence(true);
  ev["msprof"]["activation_peaks"] = SeriesPeaks(true, 180);
  const json r = BuildMemoryReport(ev);
  EXPECT_EQ(Comp(r, 0, "activation_peak")["source"], "series");
  EXPECT_NEAR(Comp(r, 0, "activation_peak")["corroboration"][0]["value_mb"].get<double>(), 180, 1e-3);
  EXPECT_NEAR(V(r, 0, "residual"), 37.25, 1e-2);
  // The same figures as the snapshot-only report.
  EXPECT_NEAR(r["devices"][0]["hbm_used_mb"].get<double>(),
              BuildMemoryReport(Evidence(true))["devices"][0]["hbm_used_mb"].get<double>(), 1e-2);
}

TEST(MemoryReport, RefusedSeriesFallsBackToTheSnapshotDeltaAndSaysWhy) {
  json ev = Evidence(true);
  ev["msprof"]["activation_peaks"] = SeriesPeaks(false, 0);
  const json r = BuildMemoryReport(ev);
  const json& act = Comp(r, 0, "activation_peak");
  EXPECT_EQ(act["source"], "npu_smi_delta");
  EXPECT_NEAR(act["value_mb"].get<double>(), 180, 1e-3);
  EXPECT_NE(act["note"].get<std::string>().find("gap"), std::string::npos) << act["note"];
  EXPECT_EQ(r["devices"][0]["hbm_used_phase"], "after_infer");
  // Without msprof the snapshot delta is the measurement, as before.
  EXPECT_EQ(Comp(BuildMemoryReport(Evidence(false)), 0, "activation_peak")["source"], "npu_smi_delta");
}

TEST(MemoryReport, WeightsFallBackToSafetensorsThenUnavailable) {
  json ev = Evidence(true);
  ev["vllm_log"]["summary"].erase("weights_gib");
  ev["vllm_log"]["summary"]["ranks"] = json::object();
  json r = BuildMemoryReport(ev);
  EXPECT_EQ(Comp(r, 0, "weights")["source"], "safetensors");
  EXPECT_NEAR(V(r, 0, "weights"), 7615691776.0 / 1048576.0, 1e-3);
  ev.erase("weights");
  r = BuildMemoryReport(ev);
  EXPECT_TRUE(Comp(r, 0, "weights")["value_mb"].is_null());
  EXPECT_EQ(Comp(r, 0, "weights")["status"], "unavailable");
}

TEST(MemoryReport, ProcessLevelMsprofWhenCsvIsNotMappedToADevice) {
  json ev = Evidence(true);
  for (auto& row : ev["msprof"]["module_mem"]) row["device_id"] = nullptr;
  const json r = BuildMemoryReport(ev);
  EXPECT_EQ(r["devices"][1]["msprof_scope"], "process");
  EXPECT_NEAR(V(r, 1, "hccl"), 597.656, 1e-3);
}

TEST(MemoryReport, NoAfterInferUsesAfterReadyAndNoActivation) {
  json ev = Evidence(true);
  ev.erase("after_infer");
  const json r = BuildMemoryReport(ev);
  EXPECT_EQ(r["devices"][0]["hbm_used_phase"], "after_ready");
  EXPECT_TRUE(Comp(r, 0, "activation_peak")["value_mb"].is_null());
  EXPECT_NEAR(V(r, 0, "residual"), 37.25, 1e-2);
}

TEST(MemoryReport, RankFromLogPrefix) {
  EXPECT_EQ(RankFromLogPrefix("", 2), 0);
  EXPECT_EQ(RankFromLogPrefix("Worker_TP1 pid=7", 2), 1);
  EXPECT_EQ(RankFromLogPrefix("Worker_DP1_TP0_EP2 pid=7", 2), 2);
  EXPECT_EQ(RankFromLogPrefix("VllmWorker rank=3 pid=7", 4), 3);
  EXPECT_EQ(RankFromLogPrefix("EngineCore_DP1 pid=7", 1), 1);
  EXPECT_EQ(RankFromLogPrefix("EngineCore pid=7", 1), 0);
  EXPECT_EQ(RankFromLogPrefix("APIServer pid=7", 1), std::nullopt);
}

TEST(MemoryReport, DeterministicAndRendersBothLanguages) {
  const json ev = Evidence(true);
  EXPECT_EQ(BuildMemoryReport(ev).dump(), BuildMemoryReport(ev).dump());
  const std::string zh = RenderMemoryReportText(BuildMemoryReport(ev), "zh");
  for (const char* w : {"固定开销", "模型权重", "KV Cache 预留", "HCCL 缓冲", "激活峰值", "未归因残差", "[交叉验证]"})
    EXPECT_NE(zh.find(w), std::string::npos) << w;
  const std::string en = RenderMemoryReportText(BuildMemoryReport(ev), "en");
  for (const char* w : {"Fixed overhead", "Model weights", "HCCL buffers", "Activation peak", "Unattributed residual"})
    EXPECT_NE(en.find(w), std::string::npos) << w;
  EXPECT_EQ(zh, RenderMemoryReportText(BuildMemoryReport(ev), "zh"));
}

}  // namespace
}  // namespace npuprof::sm
