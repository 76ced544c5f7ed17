// Key text: Z85 validation, the key-file format, making pairs.
#include "common/curve_keys.h"

#include <gtest/gtest.h>

namespace npuprof {
namespace {

TEST(CurveKeys, Z85KeysAreFortyCharactersOfItsAlphabet) {
  auto pair = MakeCurveKeyPair();
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  EXPECT_TRUE(ValidateZ85Key(pair->public_key, "k").ok());
  EXPECT_TRUE(ValidateZ85Key(pair->secret_key, "k").ok());
  Status short_key = ValidateZ85Key(pair->public_key.substr(1), "--server-key");
  EXPECT_FALSE(short_key.ok());
  EXPECT_NE(short_key.message().find("--server-key"), std::string::npos) << short_key.message();
  EXPECT_NE(short_key.message().find("40"), std::string::npos);
  std::string bad = pair->public_key;
  bad[3] = '"';  // not in Z85's alphabet
  EXPECT_FALSE(ValidateZ85Key(bad, "k").ok());
  bad[3] = ' ';
  EXPECT_FALSE(ValidateZ85Key(bad, "k").ok());
}

TEST(CurveKeys, PublicKeyFollowsFromTheSecret) {
  auto pair = MakeCurveKeyPair();
  ASSERT_TRUE(pair.ok());
  auto pub = CurvePublicOf(pair->secret_key);
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(*pub, pair->public_key);
  EXPECT_FALSE(CurvePublicOf("short").ok());
}

TEST(CurveKeys, KeyFileRoundTrips) {
  auto pair = MakeCurveKeyPair();
  ASSERT_TRUE(pair.ok());
  const std::string text = FormatKeyFile(*pair, "a comment");
  EXPECT_EQ(text.rfind("# a comment\n", 0), 0u) << text;
  auto back = ParseKeyFile(text, "f", true);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->public_key, pair->public_key);
  EXPECT_EQ(back->secret_key, pair->secret_key);

  const std::string pub_text = FormatKeyFile(CurveKeyPair{pair->public_key, ""}, "public");
  EXPECT_EQ(pub_text.find("secret-key"), std::string::npos);
  auto pub = ParseKeyFile(pub_text, "f", false);
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->public_key, pair->public_key);
  EXPECT_TRUE(pub->secret_key.empty());
}

TEST(CurveKeys, KeyFileAcceptsUnquotedValuesCommentsAndBlankLines) {
  auto pair = MakeCurveKeyPair();
  ASSERT_TRUE(pair.ok());
  const std::string text = "\n# hand-written\n  secret-key=" + pair->secret_key + "  \r\n\npublic-key =   \"" +
                           pair->public_key + "\"";  // no final newline
  auto back = ParseKeyFile(text, "f", true);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->public_key, pair->public_key);
}

TEST(CurveKeys, KeyFileErrorsNameTheLineAndTheFix) {
  auto a = MakeCurveKeyPair();
  auto b = MakeCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  auto expect_error = [](const std::string& text, bool require_secret, const std::string& part) {
    auto r = ParseKeyFile(text, "/k/peer.key", require_secret);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("/k/peer.key"), std::string::npos) << r.status().message();
  };
  expect_error("", false, "no public-key line");
  expect_error("public-key = \"" + a->public_key + "\"\n", true, "npuprof keys new");
  expect_error("public-key \"" + a->public_key + "\"\n", false, "line 1: expected");
  expect_error("# c\nprivate-key = \"" + a->secret_key + "\"\n", false, "line 2: unknown name 'private-key'");
  expect_error("public-key = \"" + a->public_key + "\"\npublic-key = \"" + a->public_key + "\"\n", false,
               "line 2: public-key given twice");
  expect_error("public-key = \"abc\"\n", false, "line 1: public-key: a CURVE key is 40");
  // A file naming one identity and holding the secret of another.
  expect_error("public-key = \"" + a->public_key + "\"\nsecret-key = \"" + b->secret_key + "\"\n", true,
               "not the public key of secret-key");
}

}  // namespace
}  // namespace npuprof
