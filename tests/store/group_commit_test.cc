// AppendGroup: per-request validation inside one batch, all-or-nothing requests.
#include <gtest/gtest.h>

#include "store/event_store.h"
#include "store_test_util.h"

namespace npuprof::store::testing {
namespace {

TEST_F(StoreTest, GroupWithOneConflictCommitsTheOthers) {
  Open({.sync = true});
  ASSERT_TRUE(store_->Append(Req("b", 0, {Ev("x")})).ok());  // b is at seq 1, global 1
  std::vector<AppendRequest> reqs = {
      Req("a", 0, {Ev("a1"), Ev("a2")}),
      Req("b", 5, {Ev("b2"), Ev("b3"), Ev("b4")}),  // conflict: b is at 1
      Req("c", 0, {Ev("c1")}),
  };
  reqs[1].index.emplace();
  reqs[1].index->set_state("should-not-exist");
  std::vector<std::vector<proto::Event>> stored;
  auto st = store_->AppendGroup(reqs, &stored);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_EQ(st[1].code(), Code::kConflict);
  EXPECT_TRUE(st[2].ok());
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[0].size(), 2u);
  EXPECT_TRUE(stored[1].empty());
  ASSERT_EQ(stored[2].size(), 1u);

  // The conflicting request left no trace: no events, no index row, no global slot.
  EXPECT_EQ(store_->ReadRun("b")->size(), 1u);
  EXPECT_FALSE(store_->GetRun("b").has_value());
  EXPECT_EQ(store_->LastSeq("b"), 1u);
  EXPECT_EQ(stored[0][0].global_pos(), 2u);
  EXPECT_EQ(stored[0][1].global_pos(), 3u);
  EXPECT_EQ(stored[2][0].global_pos(), 4u);
  EXPECT_EQ(store_->LastGlobalPos(), 4u);
  auto global = store_->ReadGlobal(1);
  ASSERT_EQ(global->size(), 4u);
  for (const auto& ev : *global) {
    EXPECT_TRUE(ev.type() != "b2" && ev.type() != "b3" && ev.type() != "b4") << ev.type();
  }
}

TEST_F(StoreTest, GroupAccountsForEarlierRequestsOfTheSameRun) {
  Open();
  std::vector<AppendRequest> reqs = {
      Req("a", 0, {Ev("1")}),
      Req("a", 1, {Ev("2"), Ev("3")}),
      Req("a", 1, {Ev("dup")}),  // a is at 3 by now
      Req("a", 3, {Ev("4")}),
  };
  auto st = store_->AppendGroup(reqs);
  EXPECT_TRUE(st[0].ok());
  EXPECT_TRUE(st[1].ok());
  EXPECT_EQ(st[2].code(), Code::kConflict);
  EXPECT_TRUE(st[3].ok());
  auto evs = store_->ReadRun("a");
  ASSERT_EQ(evs->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*evs)[i].seq(), i + 1);
    EXPECT_EQ((*evs)[i].type(), std::to_string(i + 1));
    EXPECT_EQ((*evs)[i].global_pos(), i + 1);
    EXPECT_EQ(EventHash((*evs)[i]), (*evs)[i].hash());
    if (i > 0) {
      EXPECT_EQ((*evs)[i].prev_hash(), (*evs)[i - 1].hash());
    }
  }
  EXPECT_EQ(store_->LastSeq("a"), 4u);
}

TEST_F(StoreTest, MultiEventRequestIsAllOrNothing) {
  Open();
  ASSERT_TRUE(store_->Append(Req("a", 0, {Ev("a1")})).ok());
  // Invalid third event: none of the request's events may appear.
  AppendRequest broken = Req("b", 0, {Ev("b1"), Ev("b2"), Ev("b3")});
  broken.events[2].set_run_id("elsewhere");
  std::vector<AppendRequest> reqs = {broken, Req("a", 0, {Ev("a2"), Ev("a3")}),
                                     Req("a", 1, {Ev("a2"), Ev("a3")})};
  auto st = store_->AppendGroup(reqs);
  EXPECT_EQ(st[0].code(), Code::kInvalidArgument);
  EXPECT_EQ(st[1].code(), Code::kConflict);
  EXPECT_TRUE(st[2].ok());
  EXPECT_TRUE(store_->ReadRun("b")->empty());
  EXPECT_EQ(store_->LastSeq("b"), 0u);
  auto a = store_->ReadRun("a");
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[1].type(), "a2");
  // Global order is gapless: only the committed request consumed positions.
  auto global = store_->ReadGlobal(1);
  ASSERT_EQ(global->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*global)[i].global_pos(), i + 1);
    EXPECT_EQ((*global)[i].run_id(), "a");
  }
}

// Handing the requests over (the broker's way) stores exactly what a copied
// group stores, conflicts and invalid requests included.
TEST_F(StoreTest, MovedGroupStoresWhatACopiedGroupStores) {
  auto requests = [] {
    std::vector<AppendRequest> reqs = {
        Req("a", 0, {Ev("a1", R"({"k":1})"), Ev("a2")}),
        Req("b", 3, {Ev("b1")}),  // conflict: b is new
        Req("c", 0, {Ev("c1"), Ev("c2", "{}", 2000, "result")}),
        Req("a", 2, {Ev("a3")}),
        Req("d", 0, {Ev("d1")}),
    };
    reqs[2].index.emplace().set_state("running");
    reqs[4].events[0].set_run_id("elsewhere");  // invalid
    return reqs;
  };
  Open();
  const std::vector<AppendRequest> copied_reqs = requests();
  std::vector<std::vector<proto::Event>> copied;
  std::vector<Status> copied_st = store_->AppendGroup(copied_reqs, &copied);
  auto copied_global = store_->ReadGlobal(1);
  ASSERT_TRUE(copied_global.ok());
  EXPECT_EQ(copied_reqs[0].events.size(), 2u);  // the const overload leaves them alone

  TearDown();
  SetUp();
  Open();
  std::vector<std::vector<proto::Event>> moved;
  std::vector<Status> moved_st = store_->AppendGroup(requests(), &moved);
  auto moved_global = store_->ReadGlobal(1);
  ASSERT_TRUE(moved_global.ok());

  ASSERT_EQ(moved_st.size(), copied_st.size());
  for (size_t i = 0; i < moved_st.size(); ++i) EXPECT_EQ(moved_st[i].code(), copied_st[i].code()) << i;
  EXPECT_TRUE(moved_st[0].ok());
  EXPECT_EQ(moved_st[1].code(), Code::kConflict);
  EXPECT_EQ(moved_st[4].code(), Code::kInvalidArgument);
  ASSERT_EQ(moved.size(), copied.size());
  for (size_t i = 0; i < moved.size(); ++i) {
    ASSERT_EQ(moved[i].size(), copied[i].size()) << i;
    for (size_t j = 0; j < moved[i].size(); ++j) {
      EXPECT_EQ(moved[i][j].SerializeAsString(), copied[i][j].SerializeAsString()) << i << "/" << j;
    }
  }
  ASSERT_EQ(moved_global->size(), 5u);
  ASSERT_EQ(moved_global->size(), copied_global->size());
  for (size_t i = 0; i < moved_global->size(); ++i) {
    EXPECT_EQ((*moved_global)[i].SerializeAsString(), (*copied_global)[i].SerializeAsString()) << i;
    EXPECT_EQ(EventHash((*moved_global)[i]), (*moved_global)[i].hash());
  }
  EXPECT_EQ(store_->GetRun("c")->last_seq(), 2u);
  EXPECT_EQ(store_->LastSeq("a"), 3u);
}

TEST_F(StoreTest, EmptyGroupAndIndexOnlyRequest) {
  Open();
  EXPECT_TRUE(store_->AppendGroup({}).empty());
  AppendRequest only_index = Req("a", 0, {});
  only_index.index.emplace();
  only_index.index->set_state("queued");
  ASSERT_TRUE(store_->Append(only_index).ok());
  EXPECT_EQ(store_->GetRun("a")->state(), "queued");
  EXPECT_EQ(store_->LastGlobalPos(), 0u);
  EXPECT_EQ(store_->LastSeq("a"), 0u);
}

}  // namespace
}  // namespace npuprof::store::testing
