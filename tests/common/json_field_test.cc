// The safe JSON field readers: absent, of another type, or a non-object
// document all read as absent, never throw.
#include <gtest/gtest.h>

#include "common/json_field.h"

namespace npuprof {
namespace {

using nlohmann::json;

TEST(JsonField, PresentFieldsReadAsTheyAre) {
  const json j = {{"s", "x"}, {"n", 2.5}, {"a", json::array({1, 2})}, {"o", {{"k", 1}}}};
  EXPECT_EQ(Field(j, "o"), (json{{"k", 1}}));
  EXPECT_EQ(StrField(j, "s"), "x");
  EXPECT_EQ(NumField(j, "n"), 2.5);
  EXPECT_EQ(ArrField(j, "a").size(), 2u);
}

TEST(JsonField, MissingWrongTypeAndNonObjectReadAsAbsent) {
  const json j = {{"s", 1}, {"n", "2"}, {"a", json::object()}};
  EXPECT_TRUE(Field(j, "missing").is_null());
  EXPECT_EQ(StrField(j, "s", "fallback"), "fallback");
  EXPECT_EQ(StrField(j, "missing"), "");
  EXPECT_FALSE(NumField(j, "n").has_value());
  EXPECT_TRUE(ArrField(j, "a").is_array());
  EXPECT_TRUE(ArrField(j, "a").empty());
  for (const json& doc : {json(nullptr), json::array({1}), json("text"), json(3)}) {
    EXPECT_TRUE(Field(doc, "s").is_null()) << doc.dump();
    EXPECT_EQ(StrField(doc, "s", "f"), "f") << doc.dump();
    EXPECT_FALSE(NumField(doc, "n").has_value()) << doc.dump();
    EXPECT_TRUE(ArrField(doc, "a").empty()) << doc.dump();
  }
}

}  // namespace
}  // namespace npuprof
