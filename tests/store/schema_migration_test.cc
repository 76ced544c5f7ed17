// A schema-1 store (global family holding event keys) is migrated to schema 2
// (global family holding the events) at open, also after an interrupted
// migration. The schema-1 layout is made by rewriting a store with raw RocksDB.
#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <memory>
#include <string>
#include <vector>

#include "store/keys.h"
#include "store_test_util.h"

namespace npuprof::store::testing {
namespace {

// Rewrites the store at dir into schema 1: global values become event keys,
// except for the first `left_migrated` positions (an interrupted migration).
void DowngradeToSchema1(const std::string& dir, size_t left_migrated) {
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names).ok());
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names) descs.emplace_back(n, rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::DBOptions(), dir, descs, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyHandle *global = nullptr, *meta = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "global") global = handles[i];
    if (names[i] == "meta") meta = handles[i];
  }
  ASSERT_NE(global, nullptr);
  ASSERT_NE(meta, nullptr);
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), global));
  size_t i = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++i) {
    if (i < left_migrated) continue;
    proto::Event ev;
    ASSERT_TRUE(ev.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())));
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), global, it->key(), keys::EventKey(ev.run_id(), ev.seq())).ok());
  }
  it.reset();
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), meta, "schema_version", "1").ok());
  for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  ASSERT_TRUE(db->Close().ok());
}

class SchemaMigrationTest : public StoreTest, public ::testing::WithParamInterface<size_t> {};

TEST_P(SchemaMigrationTest, Schema1StoreIsMigratedAtOpen) {
  Open();
  for (int round = 0; round < 5; ++round) {
    for (const char* run : {"a", "b", "c"}) {
      ASSERT_TRUE(store_->Append(Req(run, round, {Ev("t" + std::to_string(round))})).ok());
    }
  }
  auto before = store_->ReadGlobal(1);
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->size(), 15u);
  store_.reset();

  DowngradeToSchema1(dir_, GetParam());
  Open();
  EXPECT_EQ(store_->GetMeta("schema_version"), "2");
  auto after = store_->ReadGlobal(1);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), before->size());
  for (size_t i = 0; i < after->size(); ++i) {
    EXPECT_EQ((*after)[i].SerializeAsString(), (*before)[i].SerializeAsString()) << i;
  }
  // Appends and a partial replay go on from there.
  ASSERT_TRUE(store_->Append(Req("b", 5, {Ev("t5")})).ok());
  auto tail = store_->ReadGlobal(15);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 2u);
  EXPECT_EQ((*tail)[1].run_id(), "b");
  EXPECT_EQ((*tail)[1].seq(), 6u);
}

INSTANTIATE_TEST_SUITE_P(LeftMigrated, SchemaMigrationTest, ::testing::Values(0u, 7u));

}  // namespace
}  // namespace npuprof::store::testing
