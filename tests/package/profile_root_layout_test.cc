// The export layout of a multi-node torch-profile run (cli/profile_root_layout.h):
// every rank of every node under one root, names unique across nodes, each
// mapped to its machine and clock offset, analyse()'s stored log found.
#include <gtest/gtest.h>

#include <set>

#include "cli/profile_root_layout.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json Dir(const std::string& machine, const std::string& path) {
  return {{"path", path},
          {"machine", machine},
          {"analysis_status", "ok"},
          {"device_id", 1},
          {"outputs", {{"kernel_details_csv", {{"path", path + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv"}}}}}};
}

json Manifest() {
  return {{"run_id", "r1"},
          {"machine", "head"},
          {"nodes", json::array({{{"machine", "head"}}, {{"machine", "worker"}}})},
          {"clock_offsets",
           {{"start", {{"offsets", json::array({{{"machine", "head"}, {"offset_ms", 0.1}, {"uncertainty_ms", 0.05}},
                                                {{"machine", "worker"}, {"offset_ms", 3201.5}, {"uncertainty_ms", 0.2}}})}}}}},
          {"remote_profile_dirs", json::array({Dir("head", "/h/vllm_profile/box_10_1_ascend_pt"),
                                               Dir("head", "/h/vllm_profile/box_11_1_ascend_pt"),
                                               Dir("worker", "/w/vllm_profile/box_10_1_ascend_pt"),
                                               Dir("worker", "/w/vllm_profile/../evil/x y_ascend_pt")})}};
}

json Events() {
  return {{"events",
           json::array({{{"type", "TaskScheduled"},
                         {"payload",
                          {{"task_id", "t1"},
                           {"kind", "torch_profile.analyse_rank"},
                           {"payload", {{"dir", "/w/vllm_profile/box_10_1_ascend_pt"}, {"machine", {{"name", "worker"}}}}}}}},
                        {{"type", "TaskSucceeded"}, {"payload", {{"task_id", "t1"}, {"blobs", {{"analyse.log", "abc"}}}}}}})}};
}

TEST(ProfileRootLayout, EveryRankOfEveryNodeUnderOneRootWithUniqueNamesAndItsClock) {
  auto plan = cli::PlanProfileRootLayout(Manifest(), Events());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const json& r = (*plan)["ranks"];
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ((*plan)["profile_root"], "profile_root");
  // The two nodes' box_10_1 collide: each is prefixed with its machine.
  EXPECT_EQ(r[0]["rank_dir"], "head-box_10_1_ascend_pt");
  EXPECT_EQ(r[1]["rank_dir"], "box_11_1_ascend_pt");
  EXPECT_EQ(r[2]["rank_dir"], "worker-box_10_1_ascend_pt");
  EXPECT_EQ(r[3]["rank_dir"], "x_y_ascend_pt");  // a name that is not [A-Za-z0-9._-] is made safe
  std::set<std::string> names;
  for (const auto& x : r) names.insert(x["rank_dir"].get<std::string>());
  EXPECT_EQ(names.size(), 4u);
  EXPECT_EQ(r[2]["machine"], "worker");
  EXPECT_EQ(r[2]["node"], 1);
  EXPECT_EQ(r[2]["clock_offset_ms"], 3201.5);
  EXPECT_EQ(r[2]["clock_uncertainty_ms"], 0.2);
  EXPECT_EQ(r[2]["clock_measured"], "start");
  EXPECT_EQ(r[2]["analyse_log_sha256"], "abc");
  EXPECT_EQ(r[2]["copied"], json::array({"npuprof_rank.json", "analyse.log"}));
  EXPECT_EQ(r[2]["referenced"]["dir"], "/w/vllm_profile/box_10_1_ascend_pt");
  EXPECT_EQ(r[2]["referenced"]["kernel_details_csv"],
            "/w/vllm_profile/box_10_1_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv");
  // The head's box_10_1 has the same path name but another machine: no log of its own.
  EXPECT_TRUE(r[0]["analyse_log_sha256"].is_null());
  EXPECT_EQ(r[0]["copied"], json::array({"npuprof_rank.json"}));
  const json rec = cli::RankRecord(Manifest()["remote_profile_dirs"][2], r[2]);
  EXPECT_EQ(rec["path"], "/w/vllm_profile/box_10_1_ascend_pt");
  EXPECT_EQ(rec["export"]["rank_dir"], "worker-box_10_1_ascend_pt");
}

TEST(ProfileRootLayout, ANameStillTakenGetsANumberAndBadInputIsRefused) {
  json m = Manifest();
  // "head-box_10_1_ascend_pt" is also a real dir name of the head's.
  m["remote_profile_dirs"].push_back(Dir("head", "/h/vllm_profile/head-box_10_1_ascend_pt"));
  auto plan = cli::PlanProfileRootLayout(m, json::object());
  ASSERT_TRUE(plan.ok());
  std::set<std::string> names;
  for (const auto& x : (*plan)["ranks"]) names.insert(x["rank_dir"].get<std::string>());
  EXPECT_EQ(names.size(), 5u);
  EXPECT_TRUE(names.count("head-box_10_1-2_ascend_pt"));
  for (const auto& n : names) EXPECT_EQ(n.substr(n.size() - 10), "_ascend_pt") << n;
  EXPECT_FALSE(cli::PlanProfileRootLayout(json::object(), json::object()).ok());
  EXPECT_FALSE(cli::PlanProfileRootLayout(json::array(), json::object()).ok());
}

}  // namespace
}  // namespace npuprof::testing
