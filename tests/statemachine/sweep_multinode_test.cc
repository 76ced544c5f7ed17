// Sweeps whose points are multi-node deployments (statemachine/sweep_machine.h):
// the real torch-profile kind judges every point with its own head and the
// nodes' records from the sweep's `nodes`; a shape that does not divide over
// a point's nodes is refused naming the point and the numbers; a point naming
// a machine the sweep does not list is refused; the stored point specs keep
// no machine records.
#include <gtest/gtest.h>

#include "statemachine/engine.h"
#include "statemachine/sweep_machine.h"

namespace npuprof::sm {
namespace {

json Record(const std::string& name, const std::string& host) {
  return json{{"name", name}, {"host", host}, {"port", 22}, {"user", "u"}, {"runtime_base", "/rt"}};
}

json TorchChild(int dp, const std::vector<std::string>& machines) {
  json nodes = json::array();
  for (const auto& m : machines) nodes.push_back({{"machine", m}});
  return json{{"model", "/models/qwen"}, {"served_model_name", "qwen"}, {"tp", 1},          {"dp", dp},
              {"mode", "enforce_eager"}, {"request_kind", "text"},     {"benchmark_output_tokens", 8}, {"nodes", nodes}};
}

// A sweep over dp values on the given machines (each point's nodes: machines).
json DpSweep(const std::vector<int>& dps, const std::vector<std::string>& machines) {
  json points = json::array(), values = json::array();
  for (int dp : dps) {
    points.push_back({{"point", {{"dp", std::to_string(dp)}}}, {"spec", TorchChild(dp, machines)}});
    values.push_back(std::to_string(dp));
  }
  json nodes = json::array();
  int host = 2;
  for (const auto& m : machines)
    nodes.push_back({{"machine", m}, {"machine_record", Record(m, "127.0.0." + std::to_string(host++))}});
  return {{"machine", machines[0]},
          {"tag", "sw"},
          {"machine_record", Record(machines[0], "127.0.0.2")},
          {"child_kind", "torch-profile"},
          {"grid", {{{"key", "dp"}, {"values", values}}}},
          {"points", points},
          {"nodes", nodes}};
}

Status Validate(json& spec) { return DefaultKinds().Find("sweep")->ValidateSpec(spec); }

TEST(SweepMultiNode, EveryPointIsADeploymentWithItsHeadAndNoStoredRecords) {
  json spec = DpSweep({2, 4}, {"a", "b"});
  ASSERT_TRUE(Validate(spec).ok()) << Validate(spec).message();
  for (const auto& p : spec["points"]) {
    const json& child = p["spec"];
    EXPECT_EQ(child["machine"], "a");
    EXPECT_FALSE(child.contains("machine_record"));
    ASSERT_EQ(child["nodes"].size(), 2u);
    for (const auto& n : child["nodes"]) EXPECT_FALSE(n.contains("machine_record")) << n.dump();
    EXPECT_EQ(child["nodes"][1]["role"], "headless");
  }
  EXPECT_EQ(spec["points"][0]["spec"]["dp_local"], 1);
  EXPECT_EQ(spec["points"][1]["spec"]["dp_local"], 2);
}

TEST(SweepMultiNode, AShapeThatDoesNotDivideOverTheNodesIsRefusedNamingThePointAndTheNumbers) {
  json spec = DpSweep({2, 3}, {"a", "b"});
  const Status st = Validate(spec);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("grid point 1 (dp=3)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("dp = 3 over 2 nodes does not divide"), std::string::npos) << st.message();
}

TEST(SweepMultiNode, AGridOverNodeListsJudgesEachPointWithItsOwnHead) {
  json spec = DpSweep({2}, {"a", "b"});
  json three = TorchChild(3, {"c", "a", "b"});
  spec["points"] = json::array({{{"point", {{"node", R"(["a","b"])"}}}, {"spec", TorchChild(2, {"a", "b"})}},
                                {{"point", {{"node", R"(["c","a","b"])"}}}, {"spec", three}}});
  spec["grid"] = json::array({{{"key", "node"}, {"values", {R"(["a","b"])", R"(["c","a","b"])"}}}});
  spec["nodes"].push_back({{"machine", "c"}, {"machine_record", Record("c", "127.0.0.9")}});
  // dp 2 on 3 nodes would not divide; dp 3 does.
  json bad = spec;  // before ValidateSpec fills it in
  bad["points"][1]["spec"]["dp"] = 2;
  ASSERT_TRUE(Validate(spec).ok()) << Validate(spec).message();
  EXPECT_EQ(spec["points"][1]["spec"]["machine"], "c");
  EXPECT_EQ(spec["points"][1]["spec"]["nodes"].size(), 3u);

  const Status st = Validate(bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("grid point 1 (node=[\"c\",\"a\",\"b\"])"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("dp = 2 over 3 nodes"), std::string::npos) << st.message();
}

TEST(SweepMultiNode, AMachineTheSweepDoesNotListOrAnUnknownNodeIsRefused) {
  json spec = DpSweep({2}, {"a", "b"});
  spec["nodes"].erase(1);
  Status st = Validate(spec);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("nodes[1].machine 'b' is not among the sweep's nodes"), std::string::npos)
      << st.message();

  json unknown = DpSweep({2}, {"a", "b"});
  unknown["nodes"][1].erase("machine_record");  // the inventory has no such machine
  st = Validate(unknown);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("machine 'b' is not in the inventory"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace npuprof::sm
