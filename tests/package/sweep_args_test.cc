// The pure parts of `npuprof submit sweep` (cli/sweep_args.h).
#include <gtest/gtest.h>

#include "cli/sweep_args.h"

namespace npuprof::cli {
namespace {

TEST(SweepArgs, SplitsValuesOutsideJsonAndQuotes) {
  auto a = ParseGridOption("gpu-memory-utilization=0.8, 0.9");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->key, "gpu-memory-utilization");
  EXPECT_EQ(a->values, (std::vector<std::string>{"0.8", "0.9"}));
  auto j = ParseGridOption(R"(--compilation-config={"cudagraph_mode":"FULL_DECODE_ONLY","sizes":[1,2]},{"level":0})");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->key, "compilation-config");
  EXPECT_EQ(j->values, (std::vector<std::string>{R"({"cudagraph_mode":"FULL_DECODE_ONLY","sizes":[1,2]})",
                                                 R"({"level":0})"}));
  auto q = ParseGridOption("prompt='a, b',c");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->values, (std::vector<std::string>{"a, b", "c"}));
}

TEST(SweepArgs, RefusalsNameTheOptionAndTheFix) {
  EXPECT_NE(ParseGridOption("tp").status().message().find("write KEY=V1,V2"), std::string::npos);
  EXPECT_NE(ParseGridOption("tp=1,,2").status().message().find("empty value"), std::string::npos);
  EXPECT_NE(ParseGridOption("tp=1,2,1").status().message().find("the value 1 is given twice"), std::string::npos);
  EXPECT_NE(ParseGridOption("x={\"a\":1").status().message().find("unclosed"), std::string::npos);
  EXPECT_TRUE(IsReservedGridKey("port"));
  EXPECT_TRUE(IsReservedGridKey("machine"));
  EXPECT_FALSE(IsReservedGridKey("tp"));
}

TEST(SweepArgs, PointsAreTheCartesianProductLastKeyFastest) {
  const auto p = GridPoints({{"tp", {"1", "2"}}, {"gpu-memory-utilization", {"0.8", "0.9", "0.95"}}});
  ASSERT_EQ(p.size(), 6u);
  EXPECT_EQ(p[0], (std::vector<std::pair<std::string, std::string>>{{"tp", "1"}, {"gpu-memory-utilization", "0.8"}}));
  EXPECT_EQ(p[1][1].second, "0.9");
  EXPECT_EQ(p[3][0].second, "2");
  EXPECT_EQ(p[5], (std::vector<std::pair<std::string, std::string>>{{"tp", "2"}, {"gpu-memory-utilization", "0.95"}}));
}

TEST(SweepArgs, ANodeGridValueIsOneDeploymentAsAJsonListOfNodeFlags) {
  auto a = ParseGridOption(R"(node=["box1","box2"],["box1:0,1","box2:0,1","box3:0,1"])");
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->values.size(), 2u);
  auto two = ParseNodeList(a->values[0]);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"box1", "box2"}));
  auto three = ParseNodeList(a->values[1]);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(*three, (std::vector<std::string>{"box1:0,1", "box2:0,1", "box3:0,1"}));
  for (const char* bad : {"box1", "[]", "[1,2]", R"([""])", R"({"a":1})"}) {
    auto r = ParseNodeList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("a JSON list of --node values"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(NodeFlagValues({"--tp", "2", "--node", "a:0,1", "--node=b", "--dp", "2"}),
            (std::vector<std::string>{"a:0,1", "b"}));
  EXPECT_TRUE(NodeFlagValues({"--machine", "a"}).empty());
}

}  // namespace
}  // namespace npuprof::cli
