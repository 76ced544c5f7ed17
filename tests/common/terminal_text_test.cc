#include "common/terminal_text.h"

#include <gtest/gtest.h>

#include "common/utf8.h"

namespace npuprof {
namespace {

// What a hostile npu-smi printed on stderr: set the title, clear the screen.
const std::string kTitleAndClear = "\x1b]0;TITLE\x07\x1b[2J";

bool HasRawControl(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return true;
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F) return true;
  }
  return false;
}

TEST(TerminalText, ControlCharactersAreWrittenOut) {
  EXPECT_EQ(TerminalText("npu-smi: " + kTitleAndClear), "npu-smi: \\x1b]0;TITLE\\x07\\x1b[2J");
  EXPECT_EQ(TerminalText("a\rb\x7f" "c\x01"), "a\\rb\\x7fc\\x01");
  // C1: U+009B is a one-character CSI on terminals that honour C1.
  EXPECT_EQ(TerminalText("x\xC2\x9B" "2Jy\xC2\x80"), "x\\u009b2Jy\\u0080");
  // U+00A0 and above are text.
  EXPECT_EQ(TerminalText("\xC2\xA0固定开销"), "\xC2\xA0固定开销");
}

TEST(TerminalText, LineBreaksStayInTextAndAreWrittenOutInALine) {
  EXPECT_EQ(TerminalText("one\n\ttwo"), "one\n\ttwo");
  EXPECT_EQ(TerminalLine("one\n\ttwo"), "one\\n\\ttwo");
  EXPECT_FALSE(HasRawControl(TerminalLine("a\nb\r\x1b")));
}

TEST(TerminalText, InvalidUtf8BecomesReplacementCharacters) {
  const std::string shown = TerminalText("dcmi \377\376\x1b[2J");
  EXPECT_TRUE(IsValidUtf8(shown));
  EXPECT_EQ(shown, "dcmi \xEF\xBF\xBD\xEF\xBF\xBD\\x1b[2J");
}

TEST(TerminalText, JsonStaysTheSameJson) {
  const nlohmann::json j = {{"error", "exited 3: " + kTitleAndClear + "\x7f\xC2\x9B"}, {"n", 1}};
  for (int indent : {-1, 2}) {
    const std::string text = TerminalJson(j, indent);
    EXPECT_FALSE(HasRawControl(text)) << text;
    EXPECT_EQ(nlohmann::json::parse(text), j) << text;
  }
  EXPECT_NE(TerminalJson(j).find("\\u001b]0;TITLE\\u0007"), std::string::npos);
  EXPECT_NE(TerminalJson(j).find("\\u007f\\u009b"), std::string::npos);
  // Invalid UTF-8 in a value is replaced, never thrown.
  EXPECT_TRUE(IsValidUtf8(TerminalJson(nlohmann::json{{"s", "\xff"}})));
}

}  // namespace
}  // namespace npuprof
