// The kernel part of a torch-profile compare (views/kernel_compare.h), its
// place in BuildRunCompare and its text/HTML, and the torch-profile report
// (views/torch_report_text.h), on summaries built from CSV text here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "parsers/kernel_summary.h"
#include "views/html_run_compare.h"
#include "views/kernel_compare.h"
#include "views/run_compare.h"
#include "views/run_compare_text.h"
#include "views/torch_report_text.h"
#include "tests/support/build_paths.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json Summary(const std::string& rows) {
  KernelSummaryBuilder b;
  EXPECT_TRUE(b.Feed("Name,Type,Accelerator Core,Duration(us)\n" + rows).ok());
  auto s = b.Finish();
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? KernelSummaryJson(*s) : json();
}

const json& ByType(const json& k, const std::string& type) {
  for (const auto& r : k["by_type"])
    if (r["type"] == type) return r;
  ADD_FAILURE() << "no type " << type;
  static const json none;
  return none;
}

const std::string kA = "mm,MatMulV3,AI_CORE,100\nmm,MatMulV3,AI_CORE,100\nfa,FlashAttentionScore,MIX_AIC,50\n"
                       "norm,RmsNorm,AI_VECTOR_CORE,5\n";
const std::string kB = "mm,MatMulV3,AI_CORE,300\nmm,MatMulV3,AI_CORE,300\nfa,FlashAttentionScore,MIX_AIC,50\n"
                       "swiglu,SwiGlu,AI_VECTOR_CORE,7\n";

TEST(KernelCompare, SameSummariesHaveZeroDeltas) {
  const json a = Summary(kA);
  const json k = views::CompareKernelSummaries({a, a});
  EXPECT_EQ(k["statuses"], json::array({"ok", "ok"}));
  EXPECT_EQ(k["total_us"]["delta_us"], json::array({0.0, 0.0}));
  for (const auto& r : k["by_type"]) EXPECT_EQ(r["delta_us"][1], 0.0) << r.dump();
  for (const auto& r : k["top_movers"]) EXPECT_EQ(r["delta_us"][1], 0.0) << r.dump();
}

TEST(KernelCompare, TheSlowedKernelMovesMostAndTypesAreComplete) {
  const json k = views::CompareKernelSummaries({Summary(kA), Summary(kB)});
  EXPECT_EQ(k["total_us"]["values_us"], json::array({255.0, 657.0}));
  EXPECT_EQ(k["total_us"]["delta_us"][1], 402.0);
  EXPECT_EQ(k["by_type"][0]["type"], "MatMulV3");
  EXPECT_EQ(k["by_type"][0]["delta_us"][1], 400.0);
  EXPECT_EQ(k["by_type"][0]["delta_pct"][1], 200.0);
  EXPECT_EQ(k["by_type"][0]["count"], json::array({2, 2}));
  // A Type one run lacks took 0 µs there (the by-Type table is complete).
  EXPECT_EQ(ByType(k, "RmsNorm")["total_us"], json::array({5.0, 0}));
  EXPECT_EQ(ByType(k, "SwiGlu")["delta_us"][1], 7.0);
  EXPECT_EQ(ByType(k, "FlashAttentionScore")["delta_us"][1], 0.0);
  ASSERT_FALSE(k["top_movers"].empty());
  EXPECT_EQ(k["top_movers"][0]["name"], "mm");
  EXPECT_EQ(k["top_movers"][0]["in_top"], json::array({true, true}));
  // A kernel outside a run's top list is unknown there, not 0.
  for (const auto& m : k["top_movers"])
    if (m["name"] == "norm") {
      EXPECT_TRUE(m["total_us"][1].is_null());
      EXPECT_EQ(m["in_top"], json::array({true, false}));
    }
}

TEST(KernelCompare, MissingAndBrokenSummariesSaySo) {
  const json k = views::CompareKernelSummaries({Summary(kA), json(nullptr), json{{"error", "the header lacks Type"}}});
  EXPECT_EQ(k["statuses"], json::array({"ok", "no summary", "error: the header lacks Type"}));
  EXPECT_TRUE(ByType(k, "MatMulV3")["total_us"][1].is_null());
  EXPECT_TRUE(ByType(k, "MatMulV3")["delta_us"][2].is_null());
  EXPECT_TRUE(k["total_us"]["values_us"][2].is_null());
}

json TorchManifest(const std::string& id, const std::string& rows) {
  std::ifstream f(std::string(npuprof::build_paths::TestDataDir()) + "/views/torch_profile.manifest.json");
  std::stringstream ss;
  ss << f.rdbuf();
  json m = json::parse(ss.str());
  m["run_id"] = id;
  for (auto& d : m["remote_profile_dirs"]) d["kernel_summary"] = Summary(rows);
  return m;
}

TEST(KernelCompare, InTheRunCompareAndItsViews) {
  auto c = views::BuildRunCompare({TorchManifest("tA", kA), TorchManifest("tB", kB)});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ((*c)["ranks"].size(), 2u);
  for (const auto& r : (*c)["ranks"]) EXPECT_EQ(r["kernels"]["by_type"][0]["delta_us"][1], 400.0);
  const std::string text = views::RenderRunCompareText(*c, "en");
  EXPECT_NE(text.find("all kernels, device time"), std::string::npos) << text;
  EXPECT_NE(text.find("MatMulV3"), std::string::npos);
  EXPECT_NE(text.find("+400.0"), std::string::npos);
  auto html = views::RenderRunCompareHtml(*c, "en");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("Kernels that moved most"), std::string::npos);
  EXPECT_NE(html->find("<strong>+400</strong>"), std::string::npos);
}

TEST(TorchReport, JsonAndTextShowEachRanksKernels) {
  json m = TorchManifest("tB", kB);
  m["remote_profile_dirs"][1]["kernel_summary"] = {{"error", "kernel_details.csv: the header lacks Duration(us)"}};
  auto r = views::BuildTorchReport(m);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["run_id"], "tB");
  ASSERT_EQ((*r)["ranks"].size(), 2u);
  EXPECT_EQ((*r)["ranks"][0]["kernel_summary"]["top"][0]["name"], "mm");
  const std::string text = views::RenderTorchReportText(*r, "en");
  EXPECT_NE(text.find("kernel summary: 4 rows"), std::string::npos) << text;
  EXPECT_NE(text.find("MatMulV3"), std::string::npos);
  EXPECT_NE(text.find("600.0"), std::string::npos);
  EXPECT_NE(text.find("error: kernel_details.csv: the header lacks Duration(us)"), std::string::npos);
  EXPECT_FALSE(views::BuildTorchReport(json("x")).ok());
  EXPECT_FALSE(views::BuildTorchReport(json{{"kind", "probe"}}).ok());
}

}  // namespace
}  // namespace npuprof::testing
