// The HTML reports rendered from the JSON the server serves (saved from real
// runs over the simulated target): self-contained, every number of the JSON
// present, labels per language, hostile text escaped, bad input refused.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "tests/views/view_fixtures.h"
#include "views/charts.h"
#include "views/html_memory_report.h"
#include "views/html_torch_report.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

constexpr const char* kCsp =
    "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
    "img-src data:\">";

void ExpectSelfContained(const std::string& html) {
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>\n"));
  EXPECT_NE(html.find(kCsp), std::string::npos);
  EXPECT_LT(html.find(kCsp), html.find("<style>"));  // before anything else can load
  for (const char* bad : {"<script", "<link", "<img", "<iframe", "<object", "<embed", "src=", "href=", "url(",
                          "@import", "<use", "<image"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
}

std::string Render(const json& doc, const views::HbmSeriesSet& set = {}, const std::string& lang = "zh") {
  auto r = views::RenderMemoryReportHtml(doc, set, lang);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : "";
}

// The report's numbers as the page writes them.
std::vector<std::string> ReportNumbers(const json& report) {
  std::vector<std::string> out;
  for (const auto& d : report["devices"]) {
    for (const auto& c : d["components"]) {
      if (c["value_mb"].is_number()) out.push_back(views::FormatMbValue(c["value_mb"].get<double>()));
      if (c["percent"].is_number()) out.push_back(fmt::format("{:.1f}%", c["percent"].get<double>()));
    }
    for (const char* k : {"npu_smi_used_mb", "component_sum_mb", "unattributed_mb", "msprof_app_mb"})
      if (d["cross_validation"].contains(k) && d["cross_validation"][k].is_number())
        out.push_back(views::FormatMbValue(d["cross_validation"][k].get<double>()));
  }
  return out;
}

TEST(MemoryHtml, RealManifestEveryNumberEvidenceAndLabels) {
  const json m = TestJson("views/memory_profile.manifest.json");
  ASSERT_TRUE(m.is_object() && m["report"].is_object());
  const std::string html = Render(m);
  ExpectSelfContained(html);
  EXPECT_NE(html.find(m["run_id"].get<std::string>()), std::string::npos);
  for (const auto& n : ReportNumbers(m["report"])) EXPECT_NE(html.find(n), std::string::npos) << n;
  size_t evidence = 0;
  for (const auto& d : m["report"]["devices"]) {
    const std::string id = std::to_string(d["device_id"].get<int>());
    EXPECT_NE(html.find("id=\"device-" + id + "\""), std::string::npos);
    for (const auto& c : d["components"]) {
      EXPECT_NE(html.find(c["label_zh"].get<std::string>()), std::string::npos);
      for (const auto& e : c["evidence"]) {
        ++evidence;
        if (e.contains("blob") && !e["blob"].get<std::string>().empty()) {
          EXPECT_NE(html.find("[" + e["blob"].get<std::string>().substr(0, 12) + "]"), std::string::npos);
        }
        if (e.contains("line")) {
          EXPECT_NE(html.find(fmt::format(":{}", e["line"].dump())), std::string::npos);
        }
        if (e.contains("row")) {
          EXPECT_NE(html.find(fmt::format("row {}", e["row"].dump())), std::string::npos);
        }
      }
    }
  }
  EXPECT_GT(evidence, 0u);
  for (const auto& e : m["report"]["evidence_chain"])
    EXPECT_NE(html.find(e["blob"].get<std::string>()), std::string::npos);
  // zh words of the text report; a stacked bar of every device.
  for (const char* w : {"HBM 显存拆分报告", "交叉验证", "证据链", "各卡 HBM 组成"})
    EXPECT_NE(html.find(w), std::string::npos) << w;
  EXPECT_NE(html.find("<svg "), std::string::npos);
  // No series given: each device says so.
  EXPECT_NE(html.find("本设备没有 msprof npu_mem 时间序列"), std::string::npos);
  EXPECT_EQ(html, Render(m));  // deterministic
}

TEST(MemoryHtml, ReportJsonAndEnglish) {
  const json r = TestJson("views/memory_profile.report.json");
  ASSERT_TRUE(r.is_object() && r["devices"].is_array());
  const std::string html = Render(r, {}, "en");
  ExpectSelfContained(html);
  EXPECT_NE(html.find("<html lang=\"en\">"), std::string::npos);
  for (const char* w : {"HBM memory report", "Cross-validation", "Evidence chain", "Weight breakdown"})
    EXPECT_NE(html.find(w), std::string::npos) << w;
  for (const auto& d : r["devices"])
    for (const auto& c : d["components"]) EXPECT_NE(html.find(c["label_en"].get<std::string>()), std::string::npos);
  for (const auto& n : ReportNumbers(r)) EXPECT_NE(html.find(n), std::string::npos) << n;
  EXPECT_EQ(html.find("交叉验证"), std::string::npos);
}

TEST(MemoryHtml, HbmCurveWithPhasesAndTheActivationPeak) {
  const json m = TestJson("views/memory_profile.manifest.json");
  const json events = TestJson("views/memory_profile.events.json");
  const auto set = SeriesSetFromRun(events, ReadTestData("views/npu_mem.csv"), "npu_mem.csv",
                                    "0123456789abcdef");
  ASSERT_EQ(set.series.size(), m["report"]["devices"].size());
  ASSERT_EQ(set.peaks.size(), set.series.size());
  const std::string html = Render(m, set, "en");
  ExpectSelfContained(html);
  EXPECT_EQ(html.find("No msprof npu_mem series"), std::string::npos);
  size_t curves = 0;
  for (size_t p = html.find("<polyline"); p != std::string::npos; p = html.find("<polyline", p + 1)) ++curves;
  EXPECT_EQ(curves, set.series.size());
  for (const char* phase : {">baseline</text>", ">launch</text>", ">ready</text>", ">inference</text>", ">stop</text>"})
    EXPECT_NE(html.find(phase), std::string::npos) << phase;
  for (const auto& pk : set.peaks)
    EXPECT_NE(html.find("activation peak (series) +" + views::FormatMbValue(pk.delta_mb) + " MB"), std::string::npos);
  EXPECT_NE(html.find("msprof_csvs/npu_mem.csv"), std::string::npos);
  EXPECT_NE(html.find("[0123456789ab]"), std::string::npos);
}

TEST(MemoryHtml, HostileTextIsEscapedAndOddShapesRender) {
  json r = TestJson("views/memory_profile.report.json");
  r["notes"] = {"<script>alert(1)</script>", std::string("bad \xff bytes")};
  r["devices"][0]["components"][0]["evidence"] = {{{"file", "x\"><img src=x>"}, {"line", 3}, {"text", "</td><b>"}}};
  r["devices"][0]["components"][1]["value_mb"] = "not a number";
  r["devices"][0]["cross_validation"] = "nope";
  r["weights_breakdown"] = {{"categories", {{{"name", 7}, {"dtypes", "x"}}}}};
  const std::string html = Render(r);
  for (const char* bad : {"<script", "<img", "<b>", "</td><b>"}) EXPECT_EQ(html.find(bad), std::string::npos) << bad;
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("x&quot;&gt;&lt;img src=x&gt;:3"), std::string::npos);
  EXPECT_NE(html.find("bad \xEF\xBF\xBD bytes"), std::string::npos);
  EXPECT_NE(html.find("&lt;/td&gt;&lt;b&gt;"), std::string::npos);
}

TEST(MemoryHtml, RefusesWhatIsNoReport) {
  EXPECT_FALSE(views::RenderMemoryReportHtml(json::array()).ok());
  auto r = views::RenderMemoryReportHtml(json{{"run_id", "x"}, {"kind", "probe"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"devices\""), std::string::npos);
}

TEST(TorchHtml, RealManifestGatesRanksLatency) {
  const json m = TestJson("views/torch_profile.manifest.json");
  ASSERT_TRUE(m.is_object());
  auto r = views::RenderTorchProfileHtml(m, "en");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string& html = *r;
  ExpectSelfContained(html);
  EXPECT_NE(html.find(m["run_id"].get<std::string>()), std::string::npos);
  EXPECT_NE(html.find("Workload gate"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("{} / {}", m["workload_status"]["bench_ok"].dump(),
                                  m["workload_status"]["bench_total"].dump())),
            std::string::npos);
  for (const auto& d : m["remote_profile_dirs"]) EXPECT_NE(html.find(d["path"].get<std::string>()), std::string::npos);
  std::vector<double> ms;
  for (const auto& b : m["benchmark_results"]) ms.push_back(b["latency_ms"].get<double>());
  ASSERT_FALSE(ms.empty());
  for (double p : {50.0, 90.0, 99.0})
    EXPECT_NE(html.find(fmt::format("{:.1f} ms", *views::NearestRankPercentile(ms, p))), std::string::npos) << p;
  EXPECT_NE(html.find(">p50 "), std::string::npos);  // the chart's percentile lines
  EXPECT_EQ(html.find("Kernel summary"), std::string::npos);  // none in this manifest
  auto zh = views::RenderTorchProfileHtml(m, "zh");
  ASSERT_TRUE(zh.ok());
  EXPECT_NE(zh->find("负载门禁"), std::string::npos);
}

TEST(TorchHtml, KernelSummaryWhenARankCarriesOne) {
  json m = TestJson("views/torch_profile.manifest.json");
  m["remote_profile_dirs"][0]["kernel_summary"] = {
      {"counted_rows", 128}, {"distinct_kernels", 2}, {"total_us", 2221.5}, {"truncated", false},
      {"top", {{{"name", "aclnnMatmul_MatMulCommon_MatMulV2"}, {"type", "MatMulV2"}, {"count", 96}, {"total_us", 1234.5}},
               {{"name", "aclnnFlash<x>"}, {"type", "FlashAttentionScore"}, {"count", 32}, {"total_us", 987}}}},
      {"by_type", {{{"type", "MatMulV2"}, {"count", 96}, {"total_us", 1234.5}, {"share_pct", 55.57}}}}};
  m["remote_profile_dirs"][1]["kernel_summary"] = {{"error", "kernel_details.csv: the header lacks Duration(us)"}};
  auto r = views::RenderTorchProfileHtml(m, "en");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->find("Kernel summary"), std::string::npos);
  EXPECT_NE(r->find("<code>aclnnMatmul_MatMulCommon_MatMulV2</code>"), std::string::npos);
  EXPECT_NE(r->find("1234.5"), std::string::npos);
  EXPECT_NE(r->find("aclnnFlash&lt;x&gt;"), std::string::npos);  // names are escaped
  EXPECT_NE(r->find("55.6"), std::string::npos);
  EXPECT_NE(r->find("the header lacks Duration(us)"), std::string::npos);
}

TEST(TorchHtml, FailedRunAndRefusals) {
  json m = TestJson("views/torch_profile.manifest.json");
  m["status"] = "failed";
  m["error"] = "workload gate: benchmark_below_threshold; re-collect required";
  m["benchmark_results"] = json::array();
  m["workload_status"]["status"] = "benchmark_below_threshold";
  auto r = views::RenderTorchProfileHtml(m, "en");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->find("badge bad\">benchmark_below_threshold"), std::string::npos);
  EXPECT_NE(r->find("re-collect required"), std::string::npos);
  EXPECT_NE(r->find("No workload request results."), std::string::npos);
  EXPECT_FALSE(views::RenderTorchProfileHtml(json("x")).ok());
  EXPECT_FALSE(views::RenderTorchProfileHtml(json{{"kind", "probe"}}).ok());
}

}  // namespace
}  // namespace npuprof::testing
