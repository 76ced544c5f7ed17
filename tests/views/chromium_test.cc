// The HTML reports in a real headless Chromium, from their file:// URL:
// a screenshot that is not blank, no console message, no request for
// anything but the file itself, and the report's numbers in the rendered DOM.
// Pages built from saved real runs (tests/data/views). The memory report's
// screenshot is kept in the build tree (views/screenshots/) for the README.
// Skipped, saying so, only when no chromium is installed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "tests/views/chromium_rig.h"
#include "tests/views/hbm_watch_fixture.h"
#include "tests/views/view_fixtures.h"
#include "views/charts.h"
#include "views/html_hbm_watch.h"
#include "views/html_memory_report.h"
#include "views/html_run_compare.h"
#include "views/html_torch_report.h"
#include "views/run_compare.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ChromiumViews : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindChromium().empty())
      GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it; NPUPROF_CHROMIUM names another)";
    char tmpl[] = "/tmp/npuprof-views-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  std::string Write(const std::string& name, const std::string& html) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << html;
    return path;
  }

  // Renders and checks what every page must satisfy.
  BrowserRender Check(const std::string& path, const std::string& tag, int height = 1800) {
    auto r = RenderInChromium(path, dir_ + "/chromium-" + tag, 1280, height);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return {};
    for (const auto& line : r->console) ADD_FAILURE() << "console: " << line;
    for (const auto& url : r->page_requests) ADD_FAILURE() << "the page requested " << url;
    EXPECT_EQ(r->png.width, 1280);
    EXPECT_GT(r->png.height, 0);
    EXPECT_GT(r->png.non_background_fraction, 0.02) << "blank screenshot";
    EXPECT_GT(r->png.distinct_colours, 16u);
    EXPECT_NE(r->dom.find("</main>"), std::string::npos) << r->dom.substr(0, 500);
    return *r;
  }

  std::string dir_;
};

TEST_F(ChromiumViews, MemoryReportWithHbmCurves) {
  const json m = TestJson("views/memory_profile.manifest.json");
  const json events = TestJson("views/memory_profile.events.json");
  const auto set = SeriesSetFromRun(events, ReadTestData("views/npu_mem.csv"), "npu_mem.csv", "");
  auto html = views::RenderMemoryReportHtml(m, set, "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  // Tall enough to show device 0's table and its HBM curve.
  BrowserRender r = Check(Write("memory.html", *html), "memory", 2250);
  for (const auto& d : m["report"]["devices"])
    for (const auto& c : d["components"]) {
      if (!c["value_mb"].is_number()) continue;
      EXPECT_NE(r.dom.find(views::FormatMbValue(c["value_mb"].get<double>())), std::string::npos) << c.dump();
    }
  // The charts are in the DOM as SVG.
  EXPECT_NE(r.dom.find("<polyline"), std::string::npos);
  // Keep the screenshot where the README can take it from.
  const fs::path keep = fs::path(npuprof::build_paths::BinaryDir()) / "views" / "screenshots";
  std::error_code ec;
  fs::create_directories(keep, ec);
  fs::copy_file(r.screenshot, keep / "memory_report.png", fs::copy_options::overwrite_existing, ec);
  EXPECT_FALSE(ec) << ec.message();
}

// --operator-memory: the section listing the operators that hold the
// activation peak, and the curve's marker at the peak, rendered (the saved
// run's device 0 given an operator digest as the report projects it).
TEST_F(ChromiumViews, MemoryReportWithOperatorMemoryAtThePeak) {
  json m = TestJson("views/memory_profile.manifest.json");
  const json events = TestJson("views/memory_profile.events.json");
  const auto set = SeriesSetFromRun(events, ReadTestData("views/npu_mem.csv"), "npu_mem.csv", "");
  ASSERT_FALSE(set.series.empty());
  ASSERT_FALSE(set.series.front().samples.empty());
  const double peak_us = set.series.front().samples.back().t_us;
  m["report"]["devices"][0]["operator_memory"] = {
      {"status", "ok"},
      {"problems", json::array()},
      {"peak_operators",
       {{{"name", "aten::empty<attn>"}, {"size_mb", 612.25}, {"allocated_at_us", peak_us},
         {"released_at_us", nullptr}, {"evidence", {{"file", "operator_memory.csv"}, {"row", 4242}}}}}},
      {"peak_allocated_mb", 30000.25},
      {"peak_reserved_mb", 30040.75},
      {"fragmentation_mb", 40.5},
      {"peak_at_us", peak_us},
      {"peak_evidence", {{"file", "memory_record.csv"}, {"row", 77}}}};
  auto html = views::RenderMemoryReportHtml(m, set, "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  BrowserRender r = Check(Write("memory-opmem.html", *html), "memory-opmem", 2600);
  EXPECT_NE(r.dom.find("Operator memory at the activation peak"), std::string::npos);
  EXPECT_NE(r.dom.find("aten::empty&lt;attn&gt;"), std::string::npos) << "listed, escaped";
  EXPECT_NE(r.dom.find("operator_memory.csv row 4242"), std::string::npos);
  EXPECT_NE(r.dom.find(views::FormatMbValue(40.5)), std::string::npos) << "the fragmentation";
  EXPECT_NE(r.dom.find("operator peak: aten::empty&lt;attn&gt;"), std::string::npos) << "the curve's marker";
}

// serve --watch-hbm: the watch's page (views/html_hbm_watch.h) from the
// product's fold of known samples: device 0 leaks 1 MB per 60 s sample
// (exactly +60 MB/h), device 1 holds still.
TEST_F(ChromiumViews, HbmWatchReport) {
  auto html = views::RenderHbmWatchHtml(HbmWatchReportDoc(40, 1, 60), "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  BrowserRender r = Check(Write("hbm-watch.html", *html), "hbm-watch");
  EXPECT_NE(r.dom.find("growing: +60.0 MB/h"), std::string::npos) << "device 0's verdict";
  EXPECT_NE(r.dom.find(">steady<"), std::string::npos) << "device 1's verdict";
  EXPECT_NE(r.dom.find("99.999 %"), std::string::npos) << "the confidence";
  size_t lines = 0;
  for (size_t p = r.dom.find("<polyline"); p != std::string::npos; p = r.dom.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 4u) << "per device the samples and the fitted line, rendered";
}

TEST_F(ChromiumViews, MemoryReportInChinese) {
  const json m = TestJson("views/memory_profile.manifest.json");
  auto html = views::RenderMemoryReportHtml(m, {}, "zh");
  ASSERT_TRUE(html.ok());
  BrowserRender r = Check(Write("memory-zh.html", *html), "memory-zh");
  EXPECT_NE(r.dom.find("交叉验证"), std::string::npos);
  EXPECT_NE(r.dom.find(views::FormatMbValue(
                m["report"]["devices"][0]["cross_validation"]["npu_smi_used_mb"].get<double>())),
            std::string::npos);
}

TEST_F(ChromiumViews, TorchProfileReport) {
  const json m = TestJson("views/torch_profile.manifest.json");
  auto html = views::RenderTorchProfileHtml(m, "en");
  ASSERT_TRUE(html.ok());
  BrowserRender r = Check(Write("torch.html", *html), "torch");
  std::vector<double> ms;
  for (const auto& b : m["benchmark_results"]) ms.push_back(b["latency_ms"].get<double>());
  EXPECT_NE(r.dom.find(fmt::format("{:.1f} ms", *views::NearestRankPercentile(ms, 50))), std::string::npos);
  for (const auto& d : m["remote_profile_dirs"]) EXPECT_NE(r.dom.find(d["path"].get<std::string>()), std::string::npos);
}

// The cross-rank view of a two-node run (the saved run's ranks as the
// head's, plus two of a worker node), rendered: every rank's machine and
// device time in the DOM, the slowest rank's row marked and named.
TEST_F(ChromiumViews, TorchProfileCrossRankOfTwoNodes) {
  json m = TestJson("views/torch_profile.manifest.json");
  const auto summary = [](double total, double comm) {
    return json{{"total_us", total},
                {"top", json::array({{{"name", "aclnnMatmul_MatMulV3"}, {"type", "MatMulV3"}, {"total_us", total - comm}}})},
                {"by_type", json::array({{{"type", "MatMulV3"}, {"core", "AI_CORE"}, {"total_us", total - comm}},
                                         {{"type", "hcom_allReduce_"}, {"core", "HCCL"}, {"total_us", comm}}})}};
  };
  int device = 0;
  for (auto& d : m["remote_profile_dirs"]) {
    d["machine"] = "head";
    d["device_id"] = device;
    d["kernel_summary"] = summary(1000 + 100 * device++, 250);
  }
  m["remote_profile_dirs"].push_back({{"path", "/w/vllm_profile/w_1_x_ascend_pt"}, {"machine", "worker"},
                                      {"device_id", 0}, {"analysis_status", "ok"},
                                      {"kernel_summary", summary(3100, 600)}});
  m["remote_profile_dirs"].push_back({{"path", "/w/vllm_profile/w_2_x_ascend_pt"}, {"machine", "worker"},
                                      {"device_id", 1}, {"analysis_status", "ok"},
                                      {"kernel_summary", summary(1150, 250)}});
  auto html = views::RenderTorchProfileHtml(m, "en");
  ASSERT_TRUE(html.ok());
  BrowserRender r = Check(Write("torch-cross-rank.html", *html), "torch-cross-rank");
  EXPECT_NE(r.dom.find("Cross-rank view"), std::string::npos);
  EXPECT_NE(r.dom.find("<tr class=\"slowest\"><td>worker"), std::string::npos) << r.dom;
  EXPECT_NE(r.dom.find("w_1_x_ascend_pt · 3100.0 µs"), std::string::npos);
  // median of 1000, 1100, 1150, 3100 = 1125; the worker's first rank +175.6 %.
  EXPECT_NE(r.dom.find("1125.0 µs"), std::string::npos);
  EXPECT_NE(r.dom.find("+175.6"), std::string::npos);
  EXPECT_NE(r.dom.find("19.4"), std::string::npos);  // its communication share: 600 / 3100
}

// The compare page of two saved runs (B: 0.9 utilisation, KV +6,553.6 MB per
// device, two more devices): a table per device position and the totals,
// the values and deltas in the rendered DOM, the absent positions as "-".
TEST_F(ChromiumViews, RunComparePage) {
  json a = TestJson("views/memory_profile.manifest.json");
  json b = a;
  a["run_id"] = "rA";
  b["run_id"] = "rB";
  b["gpu_memory_utilization"] = 0.9;
  b["tp"] = 4;
  for (auto& d : b["report"]["devices"])
    for (auto& c : d["components"])
      if (c["key"] == "kv_cache") c["value_mb"] = c["value_mb"].get<double>() + 6553.6;
  json devs = b["report"]["devices"];
  for (int i = 0; i < 2; ++i) {
    json d = devs[i];
    d["device_id"] = 2 + i;
    d["rank"] = 2 + i;
    devs.push_back(d);
  }
  b["report"]["devices"] = devs;
  auto c = views::BuildRunCompare({a, b});
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto html = views::RenderRunCompareHtml(*c, "en");
  ASSERT_TRUE(html.ok()) << html.status().message();
  BrowserRender r = Check(Write("compare.html", *html), "compare", 2000);
  EXPECT_NE(r.dom.find("+" + views::FormatMbValue(6553.6)), std::string::npos);
  for (const auto& d : (*c)["devices"])
    for (const auto& comp : d["components"])
      for (const auto& v : comp["values_mb"])
        if (v.is_number()) {
          EXPECT_NE(r.dom.find(views::FormatMbValue(v.get<double>())), std::string::npos) << comp.dump();
        }
  EXPECT_NE(r.dom.find("Position 3"), std::string::npos);
  EXPECT_NE(r.dom.find("Totals (sum over devices)"), std::string::npos);
  EXPECT_NE(r.dom.find("gpu_memory_utilization"), std::string::npos);
  EXPECT_NE(r.dom.find("has no device at position 3"), std::string::npos);
}

// The rig itself must notice what it is there to catch.
TEST_F(ChromiumViews, RigCatchesRequestsConsoleErrorsAndBlankPages) {
  auto leaky = RenderInChromium(
      Write("leaky.html", "<!DOCTYPE html><html><body><p>x</p><img src=\"http://127.0.0.1:9/x.png\"></body></html>"),
      dir_ + "/chromium-leaky");
  ASSERT_TRUE(leaky.ok()) << leaky.status().message();
  ASSERT_EQ(leaky->page_requests.size(), 1u);
  EXPECT_EQ(leaky->page_requests[0], "http://127.0.0.1:9/x.png");
  auto blocked = RenderInChromium(
      Write("blocked.html",
            "<!DOCTYPE html><html><head><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\">"
            "</head><body><img src=\"http://127.0.0.1:9/y.png\"></body></html>"),
      dir_ + "/chromium-blocked");
  ASSERT_TRUE(blocked.ok());
  EXPECT_TRUE(blocked->page_requests.empty());
  EXPECT_FALSE(blocked->console.empty()) << "a CSP violation is logged to the console";
  EXPECT_LT(blocked->png.non_background_fraction, 0.001) << "an empty page is blank";
}

}  // namespace
}  // namespace npuprof::testing
