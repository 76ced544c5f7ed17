// The ZAP rule as data: who is admitted, what the reply says.
#include "broker/zap_protocol.h"

#include <zmq.h>

#include <gtest/gtest.h>

#include "common/curve_keys.h"

namespace npuprof::broker {
namespace {

std::string RawKey(const std::string& z85) {
  std::string raw(32, '\0');
  EXPECT_NE(zmq_z85_decode(reinterpret_cast<uint8_t*>(raw.data()), z85.c_str()), nullptr);
  return raw;
}

std::vector<std::string> Request(const std::string& credential, const std::string& mechanism = "CURVE",
                                 const std::string& domain = "npuprof") {
  return {"1.0", "req-7", domain, "10.0.0.5", "worker-1", mechanism, credential};
}

struct Fixture {
  CurveKeyPair local = *MakeCurveKeyPair();
  CurveKeyPair listed = *MakeCurveKeyPair();
  CurveKeyPair stranger = *MakeCurveKeyPair();
  AllowList list;
  Fixture() { EXPECT_TRUE(list.Add({"w1", listed.public_key}).ok()); }
  ZapVerdict Decide(const std::vector<std::string>& frames) {
    auto req = ParseZapRequest(frames);
    EXPECT_TRUE(req.ok()) << req.status().ToString();
    return DecideZap(*req, list, local.public_key, "npuprof");
  }
};

TEST(ZapRule, ListedAndLocalKeysAreAdmittedUnderTheirNames) {
  Fixture f;
  ZapVerdict listed = f.Decide(Request(RawKey(f.listed.public_key)));
  EXPECT_TRUE(listed.admitted);
  EXPECT_EQ(listed.status_code, "200");
  EXPECT_EQ(listed.user_id, "w1");
  EXPECT_EQ(listed.public_key, f.listed.public_key);
  ZapVerdict local = f.Decide(Request(RawKey(f.local.public_key)));
  EXPECT_TRUE(local.admitted);
  EXPECT_EQ(local.user_id, "local");
}

TEST(ZapRule, EverythingElseIsRefused) {
  Fixture f;
  ZapVerdict stranger = f.Decide(Request(RawKey(f.stranger.public_key)));
  EXPECT_FALSE(stranger.admitted);
  EXPECT_EQ(stranger.status_code, "400");
  EXPECT_EQ(stranger.public_key, f.stranger.public_key);  // for the log line
  EXPECT_EQ(stranger.status_text, "key not allowed");
  EXPECT_FALSE(f.Decide(Request(RawKey(f.listed.public_key), "CURVE", "other")).admitted);
  EXPECT_FALSE(f.Decide(Request("", "NULL")).admitted);
  EXPECT_FALSE(f.Decide(Request("user", "PLAIN")).admitted);
  EXPECT_FALSE(f.Decide(Request("short")).admitted);
  // No local key configured: nothing is admitted as local.
  auto req = ParseZapRequest(Request(RawKey(f.local.public_key)));
  ASSERT_TRUE(req.ok());
  EXPECT_FALSE(DecideZap(*req, f.list, "", "npuprof").admitted);
}

TEST(ZapRule, ReplyFramesFollowRfc27) {
  Fixture f;
  auto req = ParseZapRequest(Request(RawKey(f.listed.public_key)));
  ASSERT_TRUE(req.ok());
  const ZapVerdict v = DecideZap(*req, f.list, f.local.public_key, "npuprof");
  EXPECT_EQ(ZapReplyFrames(*req, v), (std::vector<std::string>{"1.0", "req-7", "200", "OK", "w1", ""}));
  auto refused_req = ParseZapRequest(Request(RawKey(f.stranger.public_key)));
  const ZapVerdict refused = DecideZap(*refused_req, f.list, f.local.public_key, "npuprof");
  EXPECT_EQ(ZapReplyFrames(*refused_req, refused),
            (std::vector<std::string>{"1.0", "req-7", "400", "key not allowed", "", ""}));
}

TEST(ZapRule, MalformedRequestsAreErrors) {
  EXPECT_FALSE(ParseZapRequest({"1.0", "id"}).ok());
  EXPECT_FALSE(ParseZapRequest({"2.0", "id", "d", "a", "i", "CURVE", "k"}).ok());
  EXPECT_EQ(ZapErrorReplyFrames({"1.0", "id"}, "bad")[2], "500");
  EXPECT_EQ(ZapErrorReplyFrames({"1.0", "id"}, "bad")[1], "id");
  EXPECT_EQ(ZapErrorReplyFrames({}, "bad").size(), 6u);
}

}  // namespace
}  // namespace npuprof::broker
