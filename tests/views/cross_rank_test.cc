// The cross-rank view (views/cross_rank.h): a projection of a torch-profile
// manifest's per-rank kernel summaries, in JSON, text and the HTML page.
#include <gtest/gtest.h>

#include <string>

#include "views/cross_rank.h"
#include "views/html_torch_report.h"
#include "views/torch_report_text.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

// A rank's kernel summary as KernelSummaryJson writes it: `compute_us` of
// matmul and `comm_us` of allreduce (core HCCL).
json Summary(double compute_us, double comm_us) {
  const double total = compute_us + comm_us;
  json top = json::array({{{"name", "aclnnMatmul_MatMulV3"}, {"type", "MatMulV3"}, {"core", "AI_CORE"},
                           {"count", 10}, {"total_us", compute_us}, {"share_pct", compute_us / total * 100}}});
  json by_type = json::array({{{"type", "MatMulV3"}, {"core", "AI_CORE"}, {"total_us", compute_us}}});
  if (comm_us > 0) {
    top.push_back({{"name", "hcom_allReduce__123_0_1"}, {"type", "hcom_allReduce_"}, {"core", "HCCL"},
                   {"total_us", comm_us}});
    by_type.push_back({{"type", "hcom_allReduce_"}, {"core", "HCCL"}, {"total_us", comm_us}});
  }
  return {{"total_us", total}, {"top", top}, {"by_type", by_type}, {"counted_rows", 12}};
}

json Dir(const std::string& machine, int device, const std::string& name, json summary) {
  json d = {{"path", "/root/vllm_profile/" + name}, {"analysis_status", "ok"}, {"device_id", device},
            {"kernel_summary", std::move(summary)}};
  if (!machine.empty()) d["machine"] = machine;
  return d;
}

json TwoNodeManifest() {
  return {{"kind", "torch-profile"},
          {"run_id", "r1"},
          {"machine", "head"},
          {"status", "ok"},
          {"analysis_status", "ok"},
          {"workload_status", {{"status", "ok"}}},
          {"remote_profile_dirs",
           json::array({Dir("head", 0, "h_1_a_ascend_pt", Summary(800, 200)),
                        Dir("head", 1, "h_2_a_ascend_pt", Summary(900, 100)),
                        Dir("worker", 0, "w_3_a_ascend_pt", Summary(1500, 500)),
                        Dir("worker", 1, "w_4_a_ascend_pt", json{{"path", "x"}, {"error", "header lacks Name"}})})}};
}

TEST(CrossRank, EveryRankOfEveryNodeWithTheMedianAndTheSlowest) {
  const json v = views::CrossRankView(TwoNodeManifest());
  ASSERT_EQ(v["ranks"].size(), 4u);
  EXPECT_EQ(v["ranks_with_summary"], 3);
  EXPECT_EQ(v["median_device_time_us"], 1000.0);  // 1000, 1000, 2000
  const json& w = v["ranks"][2];
  EXPECT_EQ(w["machine"], "worker");
  EXPECT_EQ(w["device_id"], 0);
  EXPECT_EQ(w["rank_dir"], "w_3_a_ascend_pt");
  EXPECT_EQ(w["device_time_us"], 2000.0);
  EXPECT_EQ(w["comm_us"], 500.0);
  EXPECT_EQ(w["comm_share_pct"], 25.0);
  EXPECT_EQ(w["top_kernel"]["name"], "aclnnMatmul_MatMulV3");
  EXPECT_EQ(w["deviation_from_median_pct"], 100.0);
  EXPECT_EQ(w["deviation_from_median_us"], 1000.0);
  EXPECT_EQ(v["ranks"][0]["comm_share_pct"], 20.0);
  EXPECT_EQ(v["ranks"][0]["deviation_from_median_pct"], 0.0);
  // A rank whose summary failed: nulls and a note; not in the median.
  const json& bad = v["ranks"][3];
  EXPECT_TRUE(bad["device_time_us"].is_null());
  EXPECT_TRUE(bad["deviation_from_median_pct"].is_null());
  EXPECT_NE(bad.value("note", "").find("header lacks Name"), std::string::npos);
  EXPECT_EQ(v["slowest"]["machine"], "worker");
  EXPECT_EQ(v["slowest"]["rank_dir"], "w_3_a_ascend_pt");
  EXPECT_EQ(v["slowest"]["deviation_from_median_pct"], 100.0);
}

TEST(CrossRank, OneNodeRunsUseTheRunsMachineAndEvenCountsTakeTheMiddleMean) {
  json m = {{"kind", "torch-profile"}, {"machine", "box1"}, {"analysis_status", "ok"},
            {"remote_profile_dirs", json::array({Dir("", 0, "a_ascend_pt", Summary(100, 0)),
                                                 Dir("", 1, "b_ascend_pt", Summary(300, 0))})}};
  m["remote_profile_dirs"][1].erase("device_id");  // an analyse that did not see the device
  const json v = views::CrossRankView(m);
  EXPECT_EQ(v["ranks"][0]["machine"], "box1");
  EXPECT_EQ(v["ranks"][0]["comm_share_pct"], 0.0);
  EXPECT_TRUE(v["ranks"][1]["device_id"].is_null());
  EXPECT_EQ(v["median_device_time_us"], 200.0);
  EXPECT_EQ(v["ranks"][0]["deviation_from_median_pct"], -50.0);
  EXPECT_EQ(v["slowest"]["rank_dir"], "b_ascend_pt");
}

TEST(CrossRank, NoRanksOrNoSummariesGiveNoMedianAndNoSlowest) {
  EXPECT_TRUE(views::CrossRankView(json::object())["ranks"].empty());
  EXPECT_TRUE(views::CrossRankView(json::array())["slowest"].is_null());
  const json v = views::CrossRankView(
      {{"remote_profile_dirs", json::array({{{"path", "/p/x_ascend_pt"}, {"kernel_summary", nullptr}}, "junk"})}});
  EXPECT_EQ(v["ranks"].size(), 2u);
  EXPECT_TRUE(v["median_device_time_us"].is_null());
  EXPECT_TRUE(v["slowest"].is_null());
  EXPECT_TRUE(v["ranks"][0]["note"].is_string());
}

TEST(CrossRank, CommunicationIsHcclByCoreOrType) {
  EXPECT_TRUE(views::IsCommunicationType("hcom_allReduce_", ""));
  EXPECT_TRUE(views::IsCommunicationType("HCCL_AllGather", "mixed"));
  EXPECT_TRUE(views::IsCommunicationType("whatever", "HCCL"));
  EXPECT_FALSE(views::IsCommunicationType("MatMulV3", "AI_CORE"));
}

TEST(CrossRank, InTheReportJsonTextAndHtml) {
  const json m = TwoNodeManifest();
  auto rep = views::BuildTorchReport(m);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ((*rep)["cross_rank"], views::CrossRankView(m));
  const std::string text = views::RenderTorchReportText(*rep, "en");
  EXPECT_NE(text.find("cross-rank view"), std::string::npos) << text;
  EXPECT_NE(text.find("w_3_a_ascend_pt"), std::string::npos) << text;
  EXPECT_NE(text.find("slowest rank: worker device 0 w_3_a_ascend_pt (2000.0 µs, +100.0% vs median)"),
            std::string::npos)
      << text;
  auto html = views::RenderTorchProfileHtml(m, "en");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("id=\"cross-rank\""), std::string::npos);
  EXPECT_NE(html->find("<tr class=\"slowest\">"), std::string::npos);
  EXPECT_NE(html->find("+100.0"), std::string::npos);
  auto zh = views::RenderTorchProfileHtml(m, "zh");
  ASSERT_TRUE(zh.ok());
  EXPECT_NE(zh->find("跨 rank 对比"), std::string::npos);
}

}  // namespace
}  // namespace npuprof::testing
