#include "common/split_lines.h"

#include <string>

#include <gtest/gtest.h>

namespace npuprof {
namespace {

using Lines = std::vector<std::string_view>;

TEST(SplitLines, EndsLinesAtNewlinesWithOrWithoutAFinalOne) {
  EXPECT_EQ(SplitLines("a\nb\n"), (Lines{"a", "b"}));
  EXPECT_EQ(SplitLines("a\nb"), (Lines{"a", "b"}));
  EXPECT_EQ(SplitLines("one"), (Lines{"one"}));
}

TEST(SplitLines, EmptyTextHasNoLinesAndEmptyLinesInsideAreKept) {
  EXPECT_TRUE(SplitLines("").empty());
  EXPECT_EQ(SplitLines("\n"), (Lines{""}));
  EXPECT_EQ(SplitLines("a\n\nb"), (Lines{"a", "", "b"}));
  EXPECT_EQ(SplitLines("\n\n"), (Lines{"", ""}));
}

TEST(SplitLines, BytesStayBytes) {
  const std::string text("x\r\n\0y\xff\n", 7);
  const Lines lines = SplitLines(text);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "x\r");
  EXPECT_EQ(lines[1], std::string_view("\0y\xff", 3));
  EXPECT_EQ(lines[1].data(), text.data() + 3);  // a view into the text, not a copy
}

}  // namespace
}  // namespace npuprof
