// The allow-list: its text format and edits.
#include "common/allow_list.h"

#include <gtest/gtest.h>

#include "common/curve_keys.h"

namespace npuprof {
namespace {

std::string NewKey() {
  auto p = MakeCurveKeyPair();
  EXPECT_TRUE(p.ok());
  return p.ok() ? p->public_key : std::string();
}

TEST(AllowList, RoundTripsThroughItsText) {
  AllowList list;
  const std::string k1 = NewKey(), k2 = NewKey();
  ASSERT_TRUE(list.Add({"worker-a", k1}).ok());
  ASSERT_TRUE(list.Add({"alice@laptop", k2}).ok());
  const std::string text = list.Format();
  auto back = AllowList::Parse(text, "allowed");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  ASSERT_EQ(back->peers().size(), 2u);
  EXPECT_EQ(back->peers()[0].name, "worker-a");
  EXPECT_EQ(back->peers()[0].public_key, k1);
  EXPECT_EQ(back->peers()[1].name, "alice@laptop");
  ASSERT_NE(back->FindKey(k2), nullptr);
  EXPECT_EQ(back->FindKey(k2)->name, "alice@laptop");
  EXPECT_EQ(back->FindKey(NewKey()), nullptr);
  EXPECT_EQ(back->FindName("worker-a")->public_key, k1);
}

TEST(AllowList, EmptyAndCommentOnlyTextsAreEmptyLists) {
  for (const std::string text : {"", "\n\n", "# nothing yet\n  \n# still nothing"}) {
    auto l = AllowList::Parse(text, "allowed");
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_TRUE(l->peers().empty());
  }
}

TEST(AllowList, ParseErrorsNameTheLine) {
  const std::string k = NewKey();
  auto expect_error = [](const std::string& text, const std::string& part) {
    auto l = AllowList::Parse(text, "/d/curve/allowed");
    ASSERT_FALSE(l.ok()) << text;
    EXPECT_NE(l.status().message().find(part), std::string::npos) << l.status().message();
    EXPECT_NE(l.status().message().find("/d/curve/allowed"), std::string::npos);
  };
  expect_error(k + "\n", "line 1: expected `<public key> <name>`");
  // Cut from the end: a real key never starts with '#' (the Z85 of 32 bytes cannot), a cut one might.
  expect_error("# c\n" + k.substr(0, 38) + " w1\n", "line 2: public key: a CURVE key is 40");
  expect_error(k + " bad/name\n", "line 1: a peer name is 1-64");
  expect_error(k + " " + std::string(65, 'x') + "\n", "line 1: a peer name is 1-64");
  expect_error(k + " local\n", "reserved");
  expect_error(k + " w1\n" + NewKey() + " w1\n", "line 2: the name 'w1' is already listed");
  expect_error(k + " w1\n" + k + " w2\n", "line 2: this key is already listed as 'w1'");
}

TEST(AllowList, AddIsIdempotentAndRefusesConflicts) {
  AllowList list;
  const std::string k1 = NewKey(), k2 = NewKey();
  bool added = false;
  ASSERT_TRUE(list.Add({"w1", k1}, &added).ok());
  EXPECT_TRUE(added);
  ASSERT_TRUE(list.Add({"w1", k1}, &added).ok());
  EXPECT_FALSE(added);
  EXPECT_EQ(list.peers().size(), 1u);
  Status same_name = list.Add({"w1", k2});
  EXPECT_EQ(same_name.code(), Code::kConflict);
  EXPECT_NE(same_name.message().find("remove it first"), std::string::npos);
  EXPECT_EQ(list.Add({"w2", k1}).code(), Code::kConflict);
  EXPECT_EQ(list.peers().size(), 1u);
}

TEST(AllowList, RemoveTakesThePeerOut) {
  AllowList list;
  const std::string k1 = NewKey(), k2 = NewKey();
  ASSERT_TRUE(list.Add({"w1", k1}).ok());
  ASSERT_TRUE(list.Add({"w2", k2}).ok());
  auto r = list.Remove("w1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->public_key, k1);
  EXPECT_EQ(list.FindKey(k1), nullptr);
  EXPECT_NE(list.FindKey(k2), nullptr);
  EXPECT_EQ(list.Remove("w1").status().code(), Code::kNotFound);
}

TEST(AllowList, PeerNames) {
  for (const char* ok : {"a", "w-1.b_c@host", "ABC123"}) EXPECT_TRUE(ValidatePeerName(ok).ok()) << ok;
  for (const char* bad : {"", "a b", "a/b", "local", "é", "a\nb"}) EXPECT_FALSE(ValidatePeerName(bad).ok()) << bad;
}

}  // namespace
}  // namespace npuprof
