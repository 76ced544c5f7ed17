// The compare of multi-node torch-profile runs (views/run_compare.h,
// views/torch_rank_positions.h): ranks are matched by their place in the
// deployment (node index, rank within the node), whatever order the manifest
// lists them in and whatever the machines are called; a position one run
// lacks is null there and named in the notes. Pure, on the saved one-node
// torch-profile manifest (tests/data/views) reshaped here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/support/build_paths.h"
#include "views/run_compare.h"
#include "views/run_compare_text.h"
#include "views/torch_rank_positions.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json OneNode(const std::string& run_id) {
  std::ifstream f(std::string(npuprof::build_paths::TestDataDir()) + "/views/torch_profile.manifest.json");
  std::stringstream ss;
  ss << f.rdbuf();
  json m = json::parse(ss.str(), nullptr, false);
  m["run_id"] = run_id;
  return m;
}

// A multi-node manifest: machines in node order, ranks_per_node dirs each,
// listed in list_order (node indices; default node order). Each dir's
// kernel_details size is 1000 * (node + 1) + rank_in_node, so a row shows
// which place it came from.
json MultiNode(const std::string& run_id, const std::vector<std::string>& machines, int ranks_per_node,
               std::vector<int> list_order = {}) {
  json m = OneNode(run_id);
  const json dir = m["remote_profile_dirs"][0];
  if (list_order.empty())
    for (size_t i = 0; i < machines.size(); ++i) list_order.push_back(static_cast<int>(i));
  m["nodes"] = json::array();
  for (size_t i = 0; i < machines.size(); ++i)
    m["nodes"].push_back({{"node", i}, {"machine", machines[i]}, {"role", i == 0 ? "head" : "headless"}});
  m["machine"] = machines[0];
  m["dp"] = static_cast<int>(machines.size());
  m["dp_local"] = 1;
  m["remote_profile_dirs"] = json::array();
  for (int node : list_order)
    for (int r = 0; r < ranks_per_node; ++r) {
      json d = dir;
      d["machine"] = machines[static_cast<size_t>(node)];
      d["path"] = "/root/" + machines[static_cast<size_t>(node)] + "/rank" + std::to_string(r) + "_ascend_pt";
      d["outputs"]["kernel_details_csv"]["size"] = 1000 * (node + 1) + r;
      m["remote_profile_dirs"].push_back(d);
    }
  m["rank_count"] = static_cast<int>(machines.size()) * ranks_per_node;
  return m;
}

json Compare(const std::vector<json>& ms) {
  auto c = views::BuildRunCompare(ms);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : json();
}

const json& KernelDetails(const json& rank_row) {
  for (const auto& o : rank_row["outputs"])
    if (o["key"] == "kernel_details_csv") return o;
  static const json none;
  ADD_FAILURE() << "no kernel_details_csv row";
  return none;
}

TEST(MultiNodeCompare, RanksAreMatchedByNodeAndRankWithinTheNodeNotByListOrder) {
  // B listed node 1's directories first (its listing answered first).
  const json a = MultiNode("tA", {"h", "w"}, 2);
  const json b = MultiNode("tB", {"h", "w"}, 2, {1, 0});
  const json c = Compare({a, b});
  ASSERT_EQ(c["ranks"].size(), 4u) << c["ranks"].dump();
  for (size_t p = 0; p < 4; ++p) {
    const json& row = c["ranks"][p];
    EXPECT_EQ(row["node"], p / 2);
    EXPECT_EQ(row["rank_in_node"], p % 2);
    EXPECT_EQ(row["machines"][0], row["machines"][1]) << row.dump();
    EXPECT_EQ(KernelDetails(row)["delta"][1], 0.0) << "position " << p << " matched another place";
    EXPECT_FALSE(row.contains("only_in"));
  }
  EXPECT_EQ(c["notes"].dump().find("has no rank"), std::string::npos) << c["notes"].dump();
}

TEST(MultiNodeCompare, PositionsDoNotDependOnTheMachinesNames) {
  const json a = MultiNode("tA", {"h1", "w1"}, 1);
  const json b = MultiNode("tB", {"h2", "w2"}, 1);
  const json c = Compare({a, b});
  ASSERT_EQ(c["ranks"].size(), 2u);
  EXPECT_EQ(c["ranks"][1]["machines"], json::array({"w1", "w2"}));
  EXPECT_EQ(KernelDetails(c["ranks"][1])["delta"][1], 0.0);
  bool machines_differ = false;
  for (const auto& f : c["config_diff"]) machines_differ |= f["field"] == "node_machines";
  EXPECT_TRUE(machines_differ) << c["config_diff"].dump();
  EXPECT_EQ(c["runs"][1]["nodes"], json::array({"h2", "w2"}));
}

TEST(MultiNodeCompare, OneNodeAgainstTwoNodesNamesThePositionsOnOneSideOnly) {
  const json a = OneNode("tA");  // 2 ranks on one machine
  const json b = MultiNode("tB", {"h", "w"}, 2);
  const json c = Compare({a, b});
  ASSERT_EQ(c["ranks"].size(), 4u);
  EXPECT_EQ(c["rank_shapes"][0]["nodes"], 1);
  EXPECT_EQ(c["rank_shapes"][1]["ranks_per_node"], json::array({2, 2}));
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(c["ranks"][p]["node"], 0);
    EXPECT_FALSE(c["ranks"][p].contains("only_in"));
    EXPECT_FALSE(c["ranks"][p]["paths"][0].is_null());
  }
  for (size_t p = 2; p < 4; ++p) {
    const json& row = c["ranks"][p];
    EXPECT_EQ(row["node"], 1);
    EXPECT_EQ(row["only_in"], json::array({"tB"}));
    EXPECT_TRUE(row["paths"][0].is_null());
    EXPECT_TRUE(KernelDetails(row)["delta"][1].is_null());
    ASSERT_EQ(row["notes"].size(), 1u);
    EXPECT_NE(row["notes"][0].get<std::string>().find("tA has no rank at node 1 rank"), std::string::npos)
        << row["notes"].dump();
  }
  const std::string notes = c["notes"].dump();
  EXPECT_NE(notes.find("tA has no rank at node 1 rank 0, node 1 rank 1 (1 node(s): 2 rank(s))"), std::string::npos)
      << notes;
  const std::string text = views::RenderRunCompareText(c, "en");
  EXPECT_NE(text.find("(node 1 rank 1)"), std::string::npos) << text;
  EXPECT_NE(text.find("tA has no rank at node 1 rank 1"), std::string::npos) << text;
}

TEST(MultiNodeCompare, AOneNodeRunKeepsItsListOrderAsPositions) {
  const json a = OneNode("tA");
  const auto at = views::RankPositions(a);
  ASSERT_EQ(at.size(), a["remote_profile_dirs"].size());
  for (size_t i = 0; i < at.size(); ++i) {
    EXPECT_EQ(at[i].key.node, 0);
    EXPECT_EQ(at[i].key.rank_in_node, static_cast<int>(i));
    EXPECT_EQ(at[i].dir, &a["remote_profile_dirs"][i]);
  }
  EXPECT_EQ(views::ShapeText(at), "1 node(s): 2 rank(s)");
  EXPECT_EQ(views::ShapeText({}), "no ranks");
}

TEST(MultiNodeCompare, AMachineTheNodesListDoesNotPlaceComesAfterThePlacedOnes) {
  json m = MultiNode("tA", {"h", "w"}, 1);
  m["remote_profile_dirs"][0]["machine"] = "stray";
  const auto at = views::RankPositions(m);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[0].machine, "w");
  EXPECT_EQ(at[0].key.node, 1);
  EXPECT_EQ(at[1].machine, "stray");
  EXPECT_EQ(at[1].key.node, 2);
}

}  // namespace
}  // namespace npuprof::testing
