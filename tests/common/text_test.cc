#include "common/text.h"

#include <gtest/gtest.h>

namespace npuprof {
namespace {

TEST(Trim, DropsAsciiWhitespaceOnBothEnds) {
  EXPECT_EQ(Trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(Trim("\f\vx\v"), "x");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim(" \t "), "");
  EXPECT_EQ(Trim("abc"), "abc");
}

TEST(PathBaseName, IsTheLastComponentOfARemotePath) {
  EXPECT_EQ(PathBaseName("/rt/r1/vllm_profile/a_1_ascend_pt"), "a_1_ascend_pt");
  EXPECT_EQ(PathBaseName("/rt/r1/vllm_profile/a_1_ascend_pt//"), "a_1_ascend_pt");
  EXPECT_EQ(PathBaseName("a_1_ascend_pt"), "a_1_ascend_pt");
  EXPECT_EQ(PathBaseName(""), "");
  EXPECT_EQ(PathBaseName("/"), "/");
}

}  // namespace
}  // namespace npuprof
