#include "common/utf8.h"

#include <gtest/gtest.h>

namespace npuprof {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextIsUnchanged) {
  for (const std::string s : {"", "plain ascii", "固定开销 HBM", "emoji \xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(ToValidUtf8(s), s);
  }
}

TEST(Utf8, InvalidBytesBecomeReplacementCharacters) {
  // A GBK-locale or broken-driver stderr: bytes that are not UTF-8 at all.
  EXPECT_FALSE(IsValidUtf8("dcmi error \377\376"));
  EXPECT_EQ(ToValidUtf8("dcmi error \377\376"), "dcmi error " + kFffd + kFffd);
  // Overlong encodings, surrogates and code points above U+10FFFF are invalid.
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));
  // A truncated sequence is one maximal invalid subpart, then the rest goes on.
  EXPECT_EQ(ToValidUtf8("a\xE4\xBD" "b"), "a" + kFffd + "b");
  EXPECT_EQ(ToValidUtf8("\xE4\xBD"), kFffd);
  // A lone continuation byte is one replacement each.
  EXPECT_EQ(ToValidUtf8("\x80\x80x"), kFffd + kFffd + "x");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xC0\xAF\xED\xA0\x80\xF4\x90\x80\x80\xFF")));
}

TEST(Utf8, TruncateNeverSplitsACharacter) {
  EXPECT_EQ(TruncateUtf8("abcdef", 10), "abcdef");
  EXPECT_EQ(TruncateUtf8("abcdef", 3, "~"), "abc~");
  // "固" is three bytes: a cut inside it backs up to before it.
  EXPECT_EQ(TruncateUtf8("a固定", 2, ""), "a");
  EXPECT_EQ(TruncateUtf8("a固定", 4, ""), "a固");
  EXPECT_TRUE(IsValidUtf8(TruncateUtf8("\377\377\377\377", 4)));
}

}  // namespace
}  // namespace npuprof
