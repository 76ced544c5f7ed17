// `npuprof compare` and `npuprof submit sweep` over multi-node torch-profile
// runs, end to end from the npuprof command against simulated hosts on their
// own loopback addresses (NpuprofHarness::AddNode, as multinode_e2e_test.cc):
//
//   * compare of a 2-node run (tp 1, dp 2) and a 1-node run: ranks matched by
//     (node, rank within the node), node 0's rank side by side, node 1's rank
//     named as existing in the 2-node run only (JSON, notes and text);
//   * a sweep over dp with --node repeated (dp 2 and 4 over 2 nodes): every
//     point on every node, its report compares the points by place;
//   * a sweep over node lists (--grid node=[...]): each point a full
//     deployment with its own head, children ok, the sweep's report
//     compares the points by rank position;
//   * a sweep over dp with --node repeated whose point does not divide over
//     the nodes, and a node list naming a machine not in the inventory, are
//     refused at submit (exit 2, naming the point and the numbers) and no
//     run exists afterwards.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

std::string Model(NpuprofHarness& h) {
  return h.MakeModel({"--layers", "2", "--hidden", "512", "--intermediate", "1024", "--vocab", "8000", "--heads", "8",
                      "--kv-heads", "2", "--head-dim", "64"});
}

// The torch-profile flags every run here shares (a short wave).
std::vector<std::string> TorchFlags(const std::string& model) {
  return {"--model", model, "--served-model-name", "m", "--mode", "enforce_eager", "--request-kind", "text",
          "--benchmark-output-tokens", "8", "--benchmark-total-requests", "4", "--benchmark-concurrency", "2",
          "--prompt-tokens", "32"};
}

std::vector<std::string> Cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class MultiNodeCompareSweepE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(h_.Start().ok());
    for (const char* n : {"head", "worker"}) ASSERT_TRUE(h_.AddNode(n, {"--devices", "2"}).ok()) << n;
    model_ = Model(h_);
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    const auto left = h_.TargetProcessesAfter(30);
    EXPECT_TRUE(left.empty()) << left.size() << " processes left on the simulated hosts";
  }
  size_t RunCount() { return h_.Cli({"runs", "--json"}).json().value("runs", json::array()).size(); }
  NpuprofHarness h_;
  std::string model_;
};

TEST_F(MultiNodeCompareSweepE2E, CompareMatchesRanksByPlaceAndNamesThoseOnOneSideOnly) {
  CliResult two = h_.Cli(Cat({"submit", "torch-profile", "--node", "head", "--node", "worker", "--tp", "1", "--dp", "2",
                              "--tag", "two", "--wait", "-q"},
                             TorchFlags(model_)),
                         300);
  ASSERT_EQ(two.exit_code, 0) << two.err << two.out;
  CliResult one = h_.Cli(
      Cat({"submit", "torch-profile", "--machine", "head", "--tp", "1", "--tag", "one", "--wait", "-q"}, TorchFlags(model_)),
      300);
  ASSERT_EQ(one.exit_code, 0) << one.err << one.out;
  const std::string a = two.out.substr(0, two.out.find_last_not_of("\n") + 1);
  const std::string b = one.out.substr(0, one.out.find_last_not_of("\n") + 1);

  CliResult c = h_.Cli({"compare", a, b, "--format", "json"});
  ASSERT_EQ(c.exit_code, 0) << c.err << c.out;
  const json cmp = c.json();
  ASSERT_EQ(cmp["ranks"].size(), 2u) << cmp["ranks"].dump();
  const json& r0 = cmp["ranks"][0];
  EXPECT_EQ(r0["node"], 0);
  EXPECT_EQ(r0["machines"], json::array({"head", "head"}));
  EXPECT_FALSE(r0.contains("only_in"));
  EXPECT_EQ(r0["analysis_statuses"], json::array({"ok", "ok"}));
  const json& r1 = cmp["ranks"][1];
  EXPECT_EQ(r1["node"], 1);
  EXPECT_EQ(r1["rank_in_node"], 0);
  EXPECT_EQ(r1["machines"][0], "worker");
  EXPECT_TRUE(r1["machines"][1].is_null());
  EXPECT_EQ(r1["only_in"], json::array({a}));
  EXPECT_NE(cmp["notes"].dump().find(b + " has no rank at node 1 rank 0 (1 node(s): 1 rank(s))"), std::string::npos)
      << cmp["notes"].dump();
  EXPECT_EQ(cmp["rank_shapes"][0]["ranks_per_node"], json::array({1, 1}));
  bool nodes_differ = false;
  for (const auto& f : cmp["config_diff"]) nodes_differ |= f["field"] == "node_machines";
  EXPECT_TRUE(nodes_differ) << cmp["config_diff"].dump();

  CliResult text = h_.Cli({"compare", a, b, "--format", "text"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(node 1 rank 0)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(b + " has no rank at node 1 rank 0"), std::string::npos) << text.out;
}

TEST_F(MultiNodeCompareSweepE2E, ASweepOverNodeListsRunsEachPointAsAFullDeployment) {
  CliResult r = h_.Cli(Cat({"submit", "sweep", "--kind", "torch-profile", "--tp", "1", "--dp", "2", "--tag", "sw",
                            "--grid", R"(node=["head"],["head","worker"])", "--run-id", "swn", "--wait"},
                           TorchFlags(model_)),
                       600);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json show = h_.Cli({"show", "swn"}).json();
  EXPECT_EQ(show["status"], "ok") << show.dump();
  ASSERT_EQ(show["children"].size(), 2u);
  const json p0 = h_.Cli({"manifest", "swn-p0"}).json();
  const json p1 = h_.Cli({"manifest", "swn-p1"}).json();
  EXPECT_EQ(p0["status"], "ok");
  EXPECT_EQ(p0["machine"], "head");
  EXPECT_FALSE(p0.contains("nodes")) << "one node is the one-node form";
  EXPECT_EQ(p0["rank_count"], 2);
  EXPECT_EQ(p1["status"], "ok");
  ASSERT_TRUE(p1["nodes"].is_array());
  EXPECT_EQ(p1["nodes"][1]["machine"], "worker");
  EXPECT_EQ(p1["rank_count"], 2);
  EXPECT_EQ(p1["analysis_status"], "ok");

  // The report compares the points: node 0 rank 1 only in p0, node 1 rank 0 only in p1.
  CliResult rep = h_.Cli({"report", "swn", "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err << rep.out;
  const json c = rep.json();
  ASSERT_EQ(c["ranks"].size(), 3u) << c["ranks"].dump();
  EXPECT_FALSE(c["ranks"][0].contains("only_in"));
  EXPECT_EQ(c["ranks"][1]["only_in"], json::array({"swn-p0"}));
  EXPECT_EQ(c["ranks"][2]["only_in"], json::array({"swn-p1"}));
  EXPECT_EQ(c["ranks"][2]["machines"][1], "worker");
  for (const std::string& n : h_.NodeNames()) EXPECT_TRUE(h_.LiveServicePids(n).empty()) << n;
}

TEST_F(MultiNodeCompareSweepE2E, ASweepOverDpWithTheNodesRepeatedRunsEveryPointOnEveryNode) {
  CliResult r = h_.Cli(Cat({"submit", "sweep", "--kind", "torch-profile", "--node", "head", "--node", "worker", "--tp",
                            "1", "--tag", "sd", "--grid", "dp=2,4", "--run-id", "swd", "--wait"},
                           TorchFlags(model_)),
                       600);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json p0 = h_.Cli({"manifest", "swd-p0"}).json();
  const json p1 = h_.Cli({"manifest", "swd-p1"}).json();
  EXPECT_EQ(p0["dp_local"], 1);
  EXPECT_EQ(p1["dp_local"], 2);
  EXPECT_EQ(p0["rank_count"], 2);
  EXPECT_EQ(p1["rank_count"], 4);
  EXPECT_EQ(p1["analysis_status"], "ok");
  // Compared by place: rank 1 of each node exists in the dp 4 point only.
  CliResult rep = h_.Cli({"report", "swd", "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err << rep.out;
  const json c = rep.json();
  ASSERT_EQ(c["ranks"].size(), 4u) << c["ranks"].dump();
  for (size_t p = 0; p < 4; ++p) {
    EXPECT_EQ(c["ranks"][p]["node"], p / 2);
    EXPECT_EQ(c["ranks"][p]["rank_in_node"], p % 2);
    if (p % 2 == 1) EXPECT_EQ(c["ranks"][p]["only_in"], json::array({"swd-p1"}));
    else EXPECT_FALSE(c["ranks"][p].contains("only_in"));
  }
}

TEST_F(MultiNodeCompareSweepE2E, APointWhoseShapeDoesNotDivideOverTheNodesIsRefusedAtSubmit) {
  const size_t before = RunCount();
  CliResult r = h_.Cli(Cat({"submit", "sweep", "--kind", "torch-profile", "--node", "head", "--node", "worker", "--tp",
                            "1", "--tag", "bad", "--grid", "dp=2,3", "--wait"},
                           TorchFlags(model_)),
                       60);
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("grid point 1 (dp=3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dp = 3 over 2 nodes does not divide"), std::string::npos) << r.err;

  CliResult unknown = h_.Cli(Cat({"submit", "sweep", "--kind", "torch-profile", "--tp", "1", "--dp", "2", "--tag", "bad", "--grid",
                                  R"(node=["head","worker"],["head","nowhere"])", "--wait"},
                                 TorchFlags(model_)),
                             60);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err << unknown.out;
  EXPECT_NE(unknown.err.find("nowhere"), std::string::npos) << unknown.err;

  CliResult bad_list = h_.Cli(Cat({"submit", "sweep", "--kind", "torch-profile", "--tp", "1", "--dp", "2", "--tag", "bad", "--grid",
                                   "node=head,worker", "--wait"},
                                  TorchFlags(model_)),
                              60);
  EXPECT_EQ(bad_list.exit_code, 2) << bad_list.err;
  EXPECT_NE(bad_list.err.find("a JSON list of --node values"), std::string::npos) << bad_list.err;
  EXPECT_EQ(RunCount(), before) << "nothing was submitted";
}

}  // namespace
}  // namespace npuprof::testing
