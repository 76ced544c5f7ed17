// The server's key material in its data dir, listen.json, and how local peers find their keys.
#include "common/server_keys.h"

#include <gtest/gtest.h>

#include "common/private_files.h"
#include "tests/security/security_test_util.h"

namespace npuprof {
namespace {

using testing::ModeOf;
using testing::ReadText;
using testing::TempDir;
using testing::WriteText;

TEST(ServerKeys, MadeAtFirstStartThenKept) {
  TempDir t;
  const std::string dd = t.path() + "/data";
  ASSERT_TRUE(EnsurePrivateDir(dd).ok());
  auto first = LoadOrCreateServerKeys(dd);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const ServerKeyPaths p = ServerKeyPathsFor(dd);
  EXPECT_EQ(ModeOf(p.dir), 0700);
  EXPECT_EQ(ModeOf(p.server_key), 0600);
  EXPECT_EQ(ModeOf(p.local_key), 0600);
  EXPECT_EQ(ModeOf(p.server_pub), 0644);
  EXPECT_NE(first->server.public_key, first->local.public_key);
  auto pub = ParseKeyFile(ReadText(p.server_pub), p.server_pub, false);
  ASSERT_TRUE(pub.ok());
  EXPECT_EQ(pub->public_key, first->server.public_key);
  EXPECT_TRUE(pub->secret_key.empty());
  auto second = LoadOrCreateServerKeys(dd);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->server.secret_key, first->server.secret_key);
  EXPECT_EQ(second->local.secret_key, first->local.secret_key);
}

TEST(ServerKeys, AnUnprotectedServerKeyIsRefused) {
  TempDir t;
  const std::string dd = t.path() + "/data";
  ASSERT_TRUE(EnsurePrivateDir(dd).ok());
  ASSERT_TRUE(LoadOrCreateServerKeys(dd).ok());
  ::chmod(ServerKeyPathsFor(dd).server_key.c_str(), 0644);
  auto r = LoadOrCreateServerKeys(dd);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("accessible by group or others"), std::string::npos) << r.status().message();
}

TEST(ServerKeys, AllowListEditsAreKept) {
  TempDir t;
  const std::string dd = t.path() + "/data";
  ASSERT_TRUE(EnsurePrivateDir(dd).ok());
  auto empty = LoadAllowList(dd);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->peers().empty());
  auto k = MakeCurveKeyPair();
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(EditAllowList(dd, [&](AllowList& l) { return l.Add({"w1", k->public_key}); }).ok());
  EXPECT_EQ(ModeOf(ServerKeyPathsFor(dd).allow_list), 0600);
  auto one = LoadAllowList(dd);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->peers().size(), 1u);
  // A failing edit writes nothing.
  Status s = EditAllowList(dd, [&](AllowList& l) {
    (void)l.Remove("w1");
    return Status::Invalid("changed my mind");
  });
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(LoadAllowList(dd)->peers().size(), 1u);
  // A list others can write is not trusted.
  ::chmod(ServerKeyPathsFor(dd).allow_list.c_str(), 0666);
  EXPECT_EQ(LoadAllowList(dd).status().code(), Code::kPermissionDenied);
}

TEST(ServerKeys, LocalPeersFollowListenJson) {
  TempDir t;
  const std::string dd = t.path() + "/data";
  ASSERT_TRUE(EnsurePrivateDir(dd).ok());
  auto none = LocalPeerKeys(dd);  // no server ever started
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto keys = LoadOrCreateServerKeys(dd);
  ASSERT_TRUE(keys.ok());
  ASSERT_TRUE(WriteListenState(dd, ListenState{false, {"ipc://" + dd + "/npuprof.sock"}, ""}).ok());
  auto plain = LocalPeerKeys(dd);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_value());
  ASSERT_TRUE(WriteListenState(dd, ListenState{true, {"tcp://127.0.0.1:1"}, keys->server.public_key}).ok());
  EXPECT_EQ(ModeOf(ServerKeyPathsFor(dd).listen_state), 0600);
  auto st = ReadListenState(dd);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->curve);
  EXPECT_EQ(st->endpoints, std::vector<std::string>{"tcp://127.0.0.1:1"});
  auto curve = LocalPeerKeys(dd);
  ASSERT_TRUE(curve.ok()) << curve.status().ToString();
  ASSERT_TRUE(curve->has_value());
  EXPECT_EQ((*curve)->server_public, keys->server.public_key);
  EXPECT_EQ((*curve)->own.public_key, keys->local.public_key);
  EXPECT_EQ((*curve)->own.secret_key, keys->local.secret_key);
  WriteText(ServerKeyPathsFor(dd).listen_state, "{\"curve\": 1}", 0600);
  EXPECT_EQ(ReadListenState(dd).status().code(), Code::kCorruption);
}

TEST(ServerKeys, DataDirOfIpcEndpoint) {
  EXPECT_EQ(DataDirOfIpcEndpoint("ipc:///home/u/.local/state/npuprof/npuprof.sock"),
            std::optional<std::string>("/home/u/.local/state/npuprof"));
  EXPECT_EQ(DataDirOfIpcEndpoint("ipc:///tmp/other.sock"), std::nullopt);
  EXPECT_EQ(DataDirOfIpcEndpoint("tcp://127.0.0.1:5555"), std::nullopt);
  EXPECT_EQ(DataDirOfIpcEndpoint("ipc:///npuprof.sock"), std::nullopt);
}

}  // namespace
}  // namespace npuprof
