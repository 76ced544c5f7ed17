// Tests of parsers/finite_number: the one reading of numbers from remote text.
#include "parsers/finite_number.h"

#include <gtest/gtest.h>

#include <string>

namespace npuprof {
namespace {

TEST(ParseFiniteNumber, DecimalNumbers) {
  for (const auto& [text, value] : {std::pair<std::string, double>{"12", 12}, {"-1", -1}, {"+3.5", 3.5},
                                    {"1.2e3", 1200}, {"0", 0}, {"1709539654242981.240", 1709539654242981.240},
                                    {"9223372036854775808", 9223372036854775808.0}}) {
    const ParsedNumber n = ParseFiniteNumber(text);
    EXPECT_EQ(n.kind, ParsedNumber::kNumber) << text;
    EXPECT_DOUBLE_EQ(n.value, value) << text;
  }
}

TEST(ParseFiniteNumber, NonFiniteAndHugeAreOutOfRange) {
  for (const std::string text : {"inf", "-inf", "INF", "infinity", "nan", "-nan", "NaN", "nan(123)", "1e999",
                                 "-1e999", "1e-400", "1e30", "-9.3e18"}) {
    EXPECT_EQ(ParseFiniteNumber(text).kind, ParsedNumber::kOutOfRange) << text;
  }
}

TEST(ParseFiniteNumber, TextThatIsNoNumber) {
  for (const std::string text : {"", "+", "N/A", "abc", "1 ", " 1", "1,5", "0x10", "1e", "--1", "inf\xff"}) {
    EXPECT_EQ(ParseFiniteNumber(text).kind, ParsedNumber::kNotANumber) << text;
  }
}

}  // namespace
}  // namespace npuprof
