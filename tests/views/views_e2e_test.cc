// Views end to end: real memory-profile and torch-profile runs through
// `npuprof` (server, local workers, loopback sshd, simulated target), then
// `npuprof report RUN --format html -o FILE` and `npuprof trace RUN -o FILE`:
// the files are written, the trace passes the strict validator, the pages
// are self-contained, carry the numbers of `report --format json`, and
// render in a real headless Chromium without console messages or requests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "tests/support/npuprof_harness.h"
#include "tests/views/chromium_rig.h"
#include "tests/views/trace_validator.h"
#include "tests/views/view_fixtures.h"
#include "views/charts.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class ViewsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start({"--export-delay", "0.5"}, 2);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "4"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override { h_.Stop(); }

  // `trace RUN -o FILE`: written, valid; returns the check.
  TraceCheck Trace(const std::string& run, const std::string& file) {
    CliResult r = h_.Cli({"trace", run, "-o", file});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json().value("file", ""), file) << r.out;
    TraceCheck c = ValidateChromeTrace(ReadFileBytes(file));
    for (const auto& p : c.problems) ADD_FAILURE() << file << ": " << p;
    EXPECT_GT(c.phase_counts["X"], 5) << file;
    return c;
  }

  std::string Html(const std::string& run, const std::string& file, const std::string& lang) {
    CliResult r = h_.Cli({"report", run, "--format", "html", "--lang", lang, "-o", file});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.json().value("format", ""), "html") << r.out;
    const std::string html = ReadFileBytes(file);
    EXPECT_TRUE(html.starts_with("<!DOCTYPE html>")) << file;
    EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
    for (const char* bad : {"<script", "src=", "href=", "url("}) EXPECT_EQ(html.find(bad), std::string::npos) << bad;
    return html;
  }

  // Renders in Chromium when installed: no console message, no request, not blank.
  void Browser(const std::string& file, const std::vector<std::string>& must_show) {
    if (FindChromium().empty()) {
      std::cerr << "chromium is not installed: the browser part of this test is skipped" << std::endl;
      return;
    }
    auto r = RenderInChromium(file, h_.Dir() + "/chromium-" + std::filesystem::path(file).stem().string());
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (const auto& line : r->console) ADD_FAILURE() << "console: " << line;
    for (const auto& url : r->page_requests) ADD_FAILURE() << "the page requested " << url;
    EXPECT_GT(r->png.non_background_fraction, 0.02);
    for (const auto& s : must_show) EXPECT_NE(r->dom.find(s), std::string::npos) << s;
  }

  NpuprofHarness h_;
  std::string model_;
};

TEST_F(ViewsE2E, MemoryAndTorchProfileRunsAsHtmlAndTraces) {
  // memory-profile
  CliResult mem = h_.Cli({"submit", "memory-profile", "--machine", "sim1", "--model", model_, "--tp", "2",
                          "--flush-seconds", "1", "--wait"},
                         200);
  ASSERT_EQ(mem.exit_code, 0) << mem.out << mem.err;
  const std::string mrun = mem.json().value("run_id", "");
  ASSERT_FALSE(mrun.empty());
  const json report = h_.Cli({"report", mrun, "--format", "json"}).json();
  ASSERT_TRUE(report.is_object() && report["devices"].is_array()) << report.dump();
  std::vector<std::string> numbers;
  for (const auto& d : report["devices"]) {
    for (const auto& c : d["components"])
      if (c["value_mb"].is_number()) numbers.push_back(views::FormatMbValue(c["value_mb"].get<double>()));
    numbers.push_back(views::FormatMbValue(d["cross_validation"]["npu_smi_used_mb"].get<double>()));
  }
  ASSERT_FALSE(numbers.empty());
  const std::string mem_html_file = h_.Dir() + "/out/memory.html";
  const std::string mem_html = Html(mrun, mem_html_file, "en");
  for (const auto& n : numbers) EXPECT_NE(mem_html.find(n), std::string::npos) << n;
  EXPECT_NE(mem_html.find(mrun), std::string::npos);
  // Each device's HBM curve from its stored npu_mem series, with the phases
  // and the activation peak the report took from the same series.
  EXPECT_EQ(mem_html.find("No msprof npu_mem series"), std::string::npos);
  size_t curves = 0;
  for (size_t p = mem_html.find("<polyline"); p != std::string::npos; p = mem_html.find("<polyline", p + 1)) ++curves;
  EXPECT_EQ(curves, report["devices"].size());
  for (const char* phase : {">baseline</text>", ">launch</text>", ">ready</text>", ">inference</text>", ">stop</text>"})
    EXPECT_NE(mem_html.find(phase), std::string::npos) << phase;
  for (const auto& d : report["devices"])
    for (const auto& c : d["components"])
      if (c["key"] == "activation_peak") {
        EXPECT_EQ(c["source"], "series") << c.dump();
        EXPECT_NE(mem_html.find("activation peak (series) +" + views::FormatMbValue(c["value_mb"].get<double>()) +
                                " MB"),
                  std::string::npos)
            << c.dump();
      }
  TraceCheck mt = Trace(mrun, h_.Dir() + "/out/memory.trace.json");
  EXPECT_EQ(mt.process_names[1], "run " + mrun + " (memory-profile)");
  // One HBM counter track per device.
  EXPECT_EQ(mt.counter_names.size(), report["devices"].size());
  EXPECT_GT(mt.phase_counts["C"], 10);
  EXPECT_EQ(h_.Cli({"trace", mrun, "-o", h_.Dir() + "/out/again.json"}).json().value("hbm_series", size_t{0}),
            report["devices"].size());
  // The same trace on stdout.
  CliResult stdout_trace = h_.Cli({"trace", mrun});
  ASSERT_EQ(stdout_trace.exit_code, 0);
  EXPECT_TRUE(ValidateChromeTrace(stdout_trace.out).ok());
  // zh (the default) to stdout.
  CliResult zh = h_.Cli({"report", mrun, "--format", "html"});
  ASSERT_EQ(zh.exit_code, 0) << zh.err;
  EXPECT_NE(zh.out.find("HBM 显存拆分报告"), std::string::npos);

  // torch-profile
  CliResult tp = h_.Cli({"submit", "torch-profile", "--machine", "sim1", "--model", model_, "--served-model-name",
                         "qwen", "--tp", "2", "--tag", "views", "--mode", "enforce_eager", "--request-kind", "text",
                         "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                         "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                         "--profile-control-timeout", "30", "--request-timeout", "30", "--wait"},
                        170);
  ASSERT_EQ(tp.exit_code, 0) << tp.out << tp.err;
  const json tm = tp.json();
  const std::string trun = tm.value("run_id", "");
  ASSERT_FALSE(trun.empty());
  const std::string torch_html_file = h_.Dir() + "/out/torch.html";
  const std::string torch_html = Html(trun, torch_html_file, "en");
  std::vector<std::string> torch_shows;
  for (const auto& d : tm["remote_profile_dirs"]) torch_shows.push_back(d["path"].get<std::string>());
  torch_shows.push_back(fmt::format("{} / {}", tm["workload_status"]["bench_ok"].dump(),
                                    tm["workload_status"]["bench_total"].dump()));
  // The cross-rank view of a one-node run: its two ranks on sim1, the slowest named.
  CliResult trep = h_.Cli({"report", trun, "--format", "json"});
  ASSERT_EQ(trep.exit_code, 0) << trep.err;
  const json cross = trep.json()["cross_rank"];
  ASSERT_EQ(cross["ranks"].size(), 2u) << cross.dump();
  for (const auto& r : cross["ranks"]) {
    EXPECT_EQ(r["machine"], "sim1");
    EXPECT_TRUE(r["device_time_us"].is_number()) << r.dump();
    EXPECT_TRUE(r["device_id"].is_number_integer()) << r.dump();
    EXPECT_GT(r["comm_share_pct"].get<double>(), 0.0) << "tp 2 all-reduces";
  }
  ASSERT_TRUE(cross["slowest"].is_object());
  torch_shows.push_back("Cross-rank view");
  torch_shows.push_back(cross["slowest"]["rank_dir"].get<std::string>());
  for (const auto& s : torch_shows) EXPECT_NE(torch_html.find(s), std::string::npos) << s;
  TraceCheck tt = Trace(trun, h_.Dir() + "/out/torch.trace.json");
  // One node, its own clock: a process with one kernel window per rank.
  EXPECT_EQ(tt.process_names[2000], "node 0 sim1 (own clock, offset not measured)");
  size_t windows = 0;
  for (const auto& e : tt.events) windows += e["ph"] == "X" && e["pid"] == 2000;
  EXPECT_EQ(windows, 2u);
  std::set<std::string> instants;
  for (const auto& e : tt.events)
    if (e["ph"] == "i") instants.insert(e["name"].get<std::string>());
  EXPECT_TRUE(instants.count("start_profile") && instants.count("stop_profile"));

  // A kind without an HTML report is a clear usage error.
  CliResult probe = h_.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  CliResult no_html = h_.Cli({"report", probe.json().value("run_id", ""), "--format", "html"});
  EXPECT_EQ(no_html.exit_code, 2);
  EXPECT_NE(no_html.err.find("has no HTML report"), std::string::npos) << no_html.err;

  Browser(mem_html_file, numbers);
  Browser(torch_html_file, torch_shows);
}

}  // namespace
}  // namespace npuprof::testing
