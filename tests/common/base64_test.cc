// Strict base64 decoding (common/base64.h): the standard alphabet in whole
// padded groups decodes to its bytes; anything else is refused naming where.
#include <gtest/gtest.h>

#include "common/base64.h"

namespace npuprof {
namespace {

TEST(DecodeBase64, WholeGroupsWithAndWithoutPaddingDecodeToTheirBytes) {
  EXPECT_EQ(*DecodeBase64(""), "");
  EXPECT_EQ(*DecodeBase64("Zg=="), "f");
  EXPECT_EQ(*DecodeBase64("Zm8="), "fo");
  EXPECT_EQ(*DecodeBase64("Zm9v"), "foo");
  EXPECT_EQ(*DecodeBase64("Zm9vYmFy"), "foobar");
  EXPECT_EQ(*DecodeBase64("AP8A/w=="), std::string("\x00\xff\x00\xff", 4));  // bytes, not text
  EXPECT_EQ(*DecodeBase64("+/+/"), std::string("\xfb\xff\xbf", 3));
}

TEST(DecodeBase64, AnythingButTheStrictFormIsRefusedNamingTheOffset) {
  for (const char* bad : {"Zg", "Zg=", "Zm9vY", "Z===", "=Zg=", "Zg==Zg==", "Zm 9v", "Zm9v\n", "Zm-v", "Zh=="}) {
    auto r = DecodeBase64(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kCorruption) << bad;
    }
  }
  EXPECT_NE(DecodeBase64("Zm-v").status().message().find("offset 2"), std::string::npos);
  EXPECT_NE(DecodeBase64("Zh==").status().message().find("after its last byte"), std::string::npos);
}

}  // namespace
}  // namespace npuprof
