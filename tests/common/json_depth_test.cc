#include "common/json_depth.h"

#include <string>

#include <gtest/gtest.h>

namespace npuprof {
namespace {

std::string Nested(size_t depth, char open = '[', char close = ']', const std::string& inner = "1") {
  return std::string(depth, open) + inner + std::string(depth, close);
}

TEST(JsonDepth, ReadsDocumentsUpToTheLimit) {
  auto a = ParseJson(R"({"a":[1,{"b":"c"}],"d":null})");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ((*a)["a"][1]["b"], "c");
  auto scalar = ParseJson("1", 0);
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(*scalar, 1);
  EXPECT_FALSE(ParseJson("[]", 0).ok());
  EXPECT_TRUE(ParseJson("[]", 1).ok());
  EXPECT_TRUE(ParseJson(Nested(kMaxJsonDepth)).ok());
  auto deep = ParseJson(Nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(deep.status().message(), TooDeepText(kMaxJsonDepth));
  EXPECT_NE(deep.status().message().find("128 levels"), std::string::npos);
  // What npuprof wraps around an accepted document (an event, an answer) stays readable.
  EXPECT_TRUE(ParseJson("{\"payload\":" + Nested(kMaxJsonDepth) + "}", kMaxOwnJsonDepth).ok());
  EXPECT_FALSE(ParseJson(Nested(kMaxOwnJsonDepth + 1), kMaxOwnJsonDepth).ok());
}

TEST(JsonDepth, CountsObjectsAndArraysAlike) {
  std::string objects;
  for (int i = 0; i < 5; ++i) objects += R"({"k":)";
  objects += "1" + std::string(5, '}');
  EXPECT_TRUE(ParseJson(objects, 5).ok());
  EXPECT_FALSE(ParseJson(objects, 4).ok());
  // Mixed, and siblings do not add up: only nesting counts.
  EXPECT_TRUE(ParseJson(R"([{"a":[1]},{"b":[2]},[[3]]])", 3).ok());
  EXPECT_FALSE(ParseJson(R"([{"a":[1]},{"b":[2]},[[[4]]]])", 3).ok());
}

// The reported crash: 100,000 levels overflowed the stack of the first walk
// of the parsed value. Refused while parsing, without building it.
TEST(JsonDepth, AHundredThousandLevelsAreRefusedNotBuilt) {
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"a":)";
  objects += "1" + std::string(100000, '}');
  for (const auto& text : {Nested(100000), objects, R"({"spec":{"v":)" + Nested(100000) + "}}",
                           Nested(100000, '[', ' ', "")}) {
    auto r = ParseJson(text);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("nested deeper than 128 levels"), std::string::npos) << r.status().message();
  }
}

TEST(JsonDepth, TextThatIsNotJsonIsRefusedNamingTheParser) {
  for (const char* bad : {"", "{", "[1,]", "{not json", "\"\xff\"", "1e999", "[1] 2"}) {
    auto r = ParseJson(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("not valid JSON: ", 0), 0u) << r.status().message();
  }
}

}  // namespace
}  // namespace npuprof
