// EventStore basics: append/read, conflicts, global order, hash chain, blobs,
// reopen, index rows and schema versions.
#include <gtest/gtest.h>

#include "store/event_store.h"
#include "store_test_util.h"

namespace npuprof::store::testing {
namespace {

TEST_F(StoreTest, AppendAndReadInOrder) {
  Open({.sync = true});
  std::vector<proto::Event> stored;
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("a"), Ev("b"), Ev("c")}), &stored).ok());
  ASSERT_EQ(stored.size(), 3u);
  EXPECT_EQ(stored[2].seq(), 3u);
  EXPECT_EQ(stored[2].global_pos(), 3u);
  EXPECT_EQ(stored[2].run_id(), "r1");
  ASSERT_TRUE(store_->Append(Req("r1", 3, {Ev("d"), Ev("e")})).ok());

  auto all = store_->ReadRun("r1");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 5u);
  const char* types[] = {"a", "b", "c", "d", "e"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*all)[i].seq(), i + 1);
    EXPECT_EQ((*all)[i].type(), types[i]);
    EXPECT_EQ((*all)[i].payload_json(), "{}");
    EXPECT_EQ((*all)[i].cause(), "submit");
  }
  auto tail = store_->ReadRun("r1", 4);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[0].seq(), 4u);
  EXPECT_EQ(store_->LastSeq("r1"), 5u);
  EXPECT_EQ(store_->LastSeq("nope"), 0u);
  EXPECT_EQ(store_->LastGlobalPos(), 5u);
  EXPECT_TRUE(store_->ReadRun("nope")->empty());
}

TEST_F(StoreTest, RunIdPrefixesDoNotMix) {
  Open();
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("a")})).ok());
  ASSERT_TRUE(store_->Append(Req("r10", 0, {Ev("b"), Ev("c")})).ok());
  ASSERT_TRUE(store_->Append(Req("r", 0, {Ev("d")})).ok());
  EXPECT_EQ(store_->ReadRun("r1")->size(), 1u);
  EXPECT_EQ(store_->ReadRun("r10")->size(), 2u);
  EXPECT_EQ(store_->ReadRun("r")->size(), 1u);
  EXPECT_EQ(store_->LastSeq("r1"), 1u);
}

TEST_F(StoreTest, ConflictOnWrongExpectedSeqWritesNothing) {
  Open();
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("a"), Ev("b")})).ok());
  std::vector<proto::Event> stored = {Ev("junk")};
  Status s = store_->Append(Req("r1", 1, {Ev("x"), Ev("y")}), &stored);
  EXPECT_EQ(s.code(), Code::kConflict) << s.ToString();
  EXPECT_TRUE(stored.empty());
  EXPECT_EQ(store_->Append(Req("r1", 7, {Ev("x")})).code(), Code::kConflict);

  AppendRequest fresh = Req("r2", 1, {Ev("x")});  // new run must expect 0
  fresh.index.emplace();
  fresh.index->set_state("queued");
  EXPECT_EQ(store_->Append(fresh).code(), Code::kConflict);

  EXPECT_EQ(store_->ReadRun("r1")->size(), 2u);
  EXPECT_TRUE(store_->ReadRun("r2")->empty());
  EXPECT_FALSE(store_->GetRun("r2").has_value());
  EXPECT_EQ(store_->LastGlobalPos(), 2u);
  EXPECT_EQ(store_->ReadGlobal(1)->size(), 2u);
  // The run continues where it was.
  ASSERT_TRUE(store_->Append(Req("r1", 2, {Ev("c")})).ok());
  EXPECT_EQ(store_->ReadRun("r1")->back().global_pos(), 3u);
}

TEST_F(StoreTest, InvalidRequestsAreRejected) {
  Open();
  EXPECT_EQ(store_->Append(Req("", 0, {Ev("a")})).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->Append(Req(std::string("a\0b", 3), 0, {Ev("a")})).code(),
            Code::kInvalidArgument);
  AppendRequest other = Req("r1", 0, {Ev("a"), Ev("b")});
  other.events[1].set_run_id("r2");
  EXPECT_EQ(store_->Append(other).code(), Code::kInvalidArgument);
  EXPECT_TRUE(store_->ReadRun("r1")->empty());
  EXPECT_EQ(store_->LastGlobalPos(), 0u);
}

TEST_F(StoreTest, GlobalOrderAcrossInterleavedRuns) {
  Open();
  const std::vector<std::pair<std::string, int>> order = {
      {"a", 1}, {"b", 1}, {"a", 2}, {"c", 1}, {"b", 2}, {"a", 3}};
  for (const auto& [run, seq] : order) {
    ASSERT_TRUE(store_->Append(Req(run, seq - 1, {Ev("t")})).ok());
  }
  auto all = store_->ReadGlobal(1);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ((*all)[i].global_pos(), i + 1);
    EXPECT_EQ((*all)[i].run_id(), order[i].first);
    EXPECT_EQ((*all)[i].seq(), static_cast<uint64_t>(order[i].second));
  }
  auto page = store_->ReadGlobal(3, 2);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].global_pos(), 3u);
  EXPECT_EQ((*page)[1].global_pos(), 4u);
  EXPECT_TRUE(store_->ReadGlobal(99)->empty());

  std::vector<uint64_t> seen;
  ASSERT_TRUE(store_->ScanGlobal(2, [&](const proto::Event& ev) {
    seen.push_back(ev.global_pos());
    return seen.size() < 3;
  }).ok());
  EXPECT_EQ(seen, (std::vector<uint64_t>{2, 3, 4}));
}

TEST_F(StoreTest, ScanGlobalCrossesBatchBoundaries) {
  Open();
  std::vector<AppendRequest> reqs;
  for (int i = 0; i < 700; ++i) reqs.push_back(Req("r" + std::to_string(i % 7), i / 7, {Ev("t")}));
  for (const auto& s : store_->AppendGroup(reqs)) ASSERT_TRUE(s.ok()) << s.ToString();
  uint64_t expect = 1;
  ASSERT_TRUE(store_->ScanGlobal(1, [&](const proto::Event& ev) {
    EXPECT_EQ(ev.global_pos(), expect++);
    return true;
  }).ok());
  EXPECT_EQ(expect, 701u);
}

TEST_F(StoreTest, HashChainLinksAndRecomputes) {
  Open();
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("a", R"({"x":1})", 5, "c1"), Ev("b")})).ok());
  ASSERT_TRUE(store_->Append(Req("r2", 0, {Ev("a")})).ok());
  ASSERT_TRUE(store_->Append(Req("r1", 2, {Ev("c", "{}", -3, "timer:t1")})).ok());
  auto evs = store_->ReadRun("r1");
  ASSERT_TRUE(evs.ok());
  ASSERT_EQ(evs->size(), 3u);
  EXPECT_EQ((*evs)[0].prev_hash(), "");
  for (size_t i = 0; i < evs->size(); ++i) {
    const auto& ev = (*evs)[i];
    EXPECT_EQ(ev.hash().size(), 64u);
    EXPECT_EQ(EventHash(ev), ev.hash()) << "seq " << ev.seq();
    if (i > 0) {
      EXPECT_EQ(ev.prev_hash(), (*evs)[i - 1].hash());
    }
  }
  // A different run starts a fresh chain.
  EXPECT_EQ(store_->ReadRun("r2")->front().prev_hash(), "");
}

TEST(EventHashTest, EncodingIsTheDocumentedOne) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  proto::Event ev;
  ev.set_run_id("r1");
  ev.set_seq(1);
  ev.set_type("t");
  ev.set_time_ms(5);
  ev.set_payload_json("{}");
  ev.set_cause("c");
  ev.set_global_pos(77);  // not hashed
  EXPECT_EQ(EventHash(ev), Sha256Hex("0:,2:r1,1:1,1:t,1:5,2:{},1:c,"));
  // Moving bytes between fields changes the hash (fields are length-prefixed).
  proto::Event shifted = ev;
  shifted.set_run_id("r");
  shifted.set_type("1t");
  EXPECT_NE(EventHash(shifted), EventHash(ev));
  proto::Event neg = ev;
  neg.set_time_ms(-5);
  EXPECT_EQ(EventHash(neg), Sha256Hex("0:,2:r1,1:1,1:t,2:-5,2:{},1:c,"));
}

TEST_F(StoreTest, RawOverwriteBreaksHashAndKeepsSeqs) {
  Open();
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("a"), Ev("b"), Ev("c")})).ok());
  proto::Event ev = store_->ReadRun("r1")->at(1);
  ev.set_payload_json(R"({"tampered":true})");
  ASSERT_TRUE(store_->RawOverwriteEventForTest(ev).ok());
  auto evs = store_->ReadRun("r1");
  ASSERT_EQ(evs->size(), 3u);
  EXPECT_EQ((*evs)[1].payload_json(), R"({"tampered":true})");
  EXPECT_NE(EventHash((*evs)[1]), (*evs)[1].hash());
  // An event written past the tip becomes the new tip.
  proto::Event extra = ev;
  extra.set_seq(4);
  ASSERT_TRUE(store_->RawOverwriteEventForTest(extra).ok());
  EXPECT_EQ(store_->LastSeq("r1"), 4u);
  EXPECT_EQ(store_->Append(Req("r1", 3, {Ev("d")})).code(), Code::kConflict);
  EXPECT_TRUE(store_->Append(Req("r1", 4, {Ev("d")})).ok());
}

TEST_F(StoreTest, BlobWithNextSyncSurvivesReopenAfterASyncedAppend) {
  Open({.sync = true});
  auto k = store_->PutBlobWithNextSync("npu-smi output");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, Sha256Hex("npu-smi output"));
  EXPECT_EQ(*store_->PutBlob("npu-smi output"), *k);  // same bytes, one copy
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("evidence", R"({"blob":")" + *k + R"("})")})).ok());
  Open({.sync = true});
  EXPECT_EQ(store_->GetBlob(*k), "npu-smi output");
  EXPECT_EQ(store_->BlobCount(), 1u);
}

TEST_F(StoreTest, BlobsAreDeduplicated) {
  Open();
  auto k1 = store_->PutBlob("hello");
  ASSERT_TRUE(k1.ok());
  EXPECT_EQ(*k1, Sha256Hex("hello"));
  auto k2 = store_->PutBlob("hello");
  ASSERT_TRUE(k2.ok());
  EXPECT_EQ(*k1, *k2);
  EXPECT_EQ(store_->BlobCount(), 1u);
  const std::string binary("a\0b\xff", 4);
  auto k3 = store_->PutBlob(binary);
  ASSERT_TRUE(k3.ok());
  EXPECT_EQ(store_->BlobCount(), 2u);
  EXPECT_EQ(store_->GetBlob(*k1), "hello");
  EXPECT_EQ(store_->GetBlob(*k3), binary);
  EXPECT_FALSE(store_->GetBlob(Sha256Hex("missing")).has_value());
  Open();
  EXPECT_EQ(store_->BlobCount(), 2u);
  ASSERT_TRUE(store_->PutBlob("hello").ok());
  EXPECT_EQ(store_->BlobCount(), 2u);
  ASSERT_TRUE(store_->PutBlob("").ok());
  EXPECT_EQ(store_->BlobCount(), 3u);
}

TEST_F(StoreTest, ReopenKeepsEverythingAndContinues) {
  Open({.sync = true});
  ASSERT_TRUE(store_->Append(Req("a", 0, {Ev("x"), Ev("y")})).ok());
  ASSERT_TRUE(store_->Append(Req("b", 0, {Ev("x")})).ok());
  ASSERT_TRUE(store_->PutMeta("k", "v").ok());
  auto before = store_->ReadGlobal(1);
  ASSERT_TRUE(before.ok());

  Open({.sync = true});
  EXPECT_EQ(store_->LastGlobalPos(), 3u);
  EXPECT_EQ(store_->LastSeq("a"), 2u);
  EXPECT_EQ(store_->GetMeta("k"), "v");
  EXPECT_EQ(store_->GetMeta("schema_version"), "2");
  auto after = store_->ReadGlobal(1);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < after->size(); ++i) {
    EXPECT_EQ((*after)[i].SerializeAsString(), (*before)[i].SerializeAsString());
  }
  EXPECT_EQ(store_->Append(Req("a", 1, {Ev("z")})).code(), Code::kConflict);
  std::vector<proto::Event> stored;
  ASSERT_TRUE(store_->Append(Req("a", 2, {Ev("z")}), &stored).ok());
  EXPECT_EQ(stored[0].seq(), 3u);
  EXPECT_EQ(stored[0].global_pos(), 4u);
  EXPECT_EQ(stored[0].prev_hash(), (*before)[1].hash());
  EXPECT_EQ(store_->GetMeta("next_global_pos"), "5");
}

TEST_F(StoreTest, HasEventsFindsEveryRunWithEvents) {
  Open();
  std::vector<proto::Event> stored;
  ASSERT_TRUE(store_->Append(Req("r1", 0, {Ev("a"), Ev("b")}), &stored).ok());
  ASSERT_TRUE(store_->Append(Req("_machines", 0, {Ev("machine_added")})).ok());
  AppendRequest indexed = Req("r2", 0, {Ev("a")});
  indexed.index.emplace().set_state("queued");
  ASSERT_TRUE(store_->Append(indexed).ok());
  // An index row without events is not a run ReadRun can read.
  AppendRequest index_only = Req("r3", 0, {});
  index_only.index.emplace().set_state("queued");
  ASSERT_TRUE(store_->Append(index_only).ok());
  // A refused append caches the empty tip of its run.
  EXPECT_EQ(store_->Append(Req("ghost", 4, {Ev("a")})).code(), Code::kConflict);

  auto has = [&](const std::string& run) {
    Result<bool> r = store_->HasEvents(run);
    EXPECT_TRUE(r.ok()) << run << ": " << r.status().ToString();
    return r.ok() && *r;
  };
  auto expect_all = [&] {
    EXPECT_TRUE(has("r1"));
    EXPECT_TRUE(has("_machines"));
    EXPECT_TRUE(has("r2"));
    EXPECT_FALSE(has("r3"));
    EXPECT_FALSE(has("ghost"));
    EXPECT_FALSE(has("r"));  // a prefix of r1
    EXPECT_FALSE(has("r10"));
    EXPECT_FALSE(has("nope"));
    EXPECT_FALSE(has(""));
    EXPECT_FALSE(has(std::string("r1\0x", 4)));
  };
  expect_all();  // from the tip cache

  // Not cached, events only in the memtable: a raw write (here of the same
  // bytes) makes the store forget the tip of r1.
  ASSERT_TRUE(store_->RawOverwriteEventForTest(stored[0]).ok());
  EXPECT_TRUE(has("r1"));

  // After reopen nothing is cached and the events are in table files (the
  // write-ahead log is flushed to level 0 on recovery).
  Open();
  expect_all();
}

// An append that takes its run for new (expected seq 0) must still conflict
// with a run whose tip is not cached, whether its events are in the memtable
// or in table files.
TEST_F(StoreTest, AppendToANewRunChecksTheStoreWhenTheTipIsNotCached) {
  Open();
  std::vector<proto::Event> stored;
  ASSERT_TRUE(store_->Append(Req("a", 0, {Ev("x"), Ev("y")}), &stored).ok());
  ASSERT_TRUE(store_->Append(Req("b", 0, {Ev("x")})).ok());
  ASSERT_TRUE(store_->RawOverwriteEventForTest(stored[1]).ok());  // forgets a's tip
  EXPECT_EQ(store_->Append(Req("a", 0, {Ev("z")})).code(), Code::kConflict);
  EXPECT_EQ(store_->LastSeq("a"), 2u);

  Open();  // nothing cached
  EXPECT_EQ(store_->Append(Req("b", 0, {Ev("z")})).code(), Code::kConflict);
  std::vector<AppendRequest> group = {Req("a", 0, {Ev("z")}), Req("c", 0, {Ev("c1")}),
                                      Req("c", 0, {Ev("c2")})};
  auto st = store_->AppendGroup(group);
  EXPECT_EQ(st[0].code(), Code::kConflict);
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
  EXPECT_EQ(st[2].code(), Code::kConflict);  // c is at 1 by then
  ASSERT_TRUE(store_->Append(Req("a", 2, {Ev("z")}), &stored).ok());
  EXPECT_EQ(stored[0].seq(), 3u);
  EXPECT_EQ(store_->ReadRun("a")->size(), 3u);
  EXPECT_EQ(store_->ReadRun("b")->size(), 1u);
  EXPECT_EQ(store_->ReadRun("c")->size(), 1u);
}

TEST_F(StoreTest, GlobalPosNeverReusedEvenIfMetaIsAhead) {
  Open();
  ASSERT_TRUE(store_->Append(Req("a", 0, {Ev("x")})).ok());
  ASSERT_TRUE(store_->PutMeta("next_global_pos", "10").ok());
  Open();
  EXPECT_EQ(store_->LastGlobalPos(), 9u);
  std::vector<proto::Event> stored;
  ASSERT_TRUE(store_->Append(Req("a", 1, {Ev("y")}), &stored).ok());
  EXPECT_EQ(stored[0].global_pos(), 10u);
}

proto::RunIndexRow Row(const std::string& kind, const std::string& state, const std::string& machine,
                       const std::string& tag, bool terminal) {
  proto::RunIndexRow r;
  r.set_kind(kind);
  r.set_state(state);
  r.set_machine(machine);
  r.set_tag(tag);
  r.set_terminal(terminal);
  return r;
}

TEST_F(StoreTest, IndexRowsAndListRunsFilters) {
  Open();
  auto add = [&](const std::string& run, uint64_t expected, proto::RunIndexRow row) {
    AppendRequest r = Req(run, expected, {Ev("e")});
    r.index = std::move(row);
    ASSERT_TRUE(store_->Append(r).ok());
  };
  add("r1", 0, Row("profile", "running", "m1", "nightly", false));
  add("r2", 0, Row("probe", "done", "m2", "nightly", true));
  add("r3", 0, Row("profile", "done", "m1", "adhoc", true));
  add("r1", 1, Row("profile", "analysing", "m1", "nightly", false));  // replaces r1's row

  auto r1 = store_->GetRun("r1");
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->run_id(), "r1");
  EXPECT_EQ(r1->state(), "analysing");
  EXPECT_EQ(r1->last_seq(), 2u);
  EXPECT_FALSE(store_->GetRun("r9").has_value());

  auto ids = [&](const RunFilter& f) {
    std::vector<std::string> out;
    for (const auto& r : store_->ListRuns(f)) out.push_back(r.run_id());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ids({}), (V{"r1", "r2", "r3"}));
  EXPECT_EQ(ids({.state = "done"}), (V{"r2", "r3"}));
  EXPECT_EQ(ids({.kind = "profile"}), (V{"r1", "r3"}));
  EXPECT_EQ(ids({.machine = "m2"}), (V{"r2"}));
  EXPECT_EQ(ids({.tag = "nightly"}), (V{"r1", "r2"}));
  EXPECT_EQ(ids({.terminal = false}), (V{"r1"}));
  EXPECT_EQ(ids({.terminal = true}), (V{"r2", "r3"}));
  EXPECT_EQ(ids({.kind = "profile", .tag = "adhoc", .terminal = true}), (V{"r3"}));
  EXPECT_TRUE(ids({.state = "nope"}).empty());

  AppendRequest bad = Req("r2", 1, {Ev("e")});
  bad.index = Row("x", "y", "z", "w", false);
  bad.index->set_run_id("r3");
  EXPECT_EQ(store_->Append(bad).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->GetRun("r3")->kind(), "profile");
}

TEST_F(StoreTest, RefusesNewerSchemaVersion) {
  Open();
  EXPECT_EQ(store_->GetMeta("schema_version"), "2");
  ASSERT_TRUE(store_->PutMeta("schema_version", "3").ok());
  store_.reset();
  auto r = EventStore::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("schema version 3"), std::string::npos) << r.status().ToString();

  // The refusal closed the DB again (no lock left behind) and changed nothing.
  auto again = EventStore::Open(dir_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition);
}

TEST_F(StoreTest, RefusesGarbageSchemaVersion) {
  Open();
  ASSERT_TRUE(store_->PutMeta("schema_version", "abc").ok());
  store_.reset();
  auto r = EventStore::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCorruption);
}

TEST_F(StoreTest, SecondOpenOfSameDirFailsCleanly) {
  Open();
  auto r = EventStore::Open(dir_);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.status().message().empty());
}

}  // namespace
}  // namespace npuprof::store::testing
