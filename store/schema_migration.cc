// Schema migrations of the EventStore, run at open (see event_store.h).
//
// 1 -> 2: the global column family held, per position, the key of the event
// in the events family (run_id '\0' seq); replay then had to sort and seek
// into every run's key range chunk by chunk. From version 2 it holds the
// event itself (the same bytes as in the events family), so a replay is one
// sequential scan. The migration rewrites every global value in batches and
// sets schema_version = 2 in the last, synced batch. It can be interrupted
// and run again: a value that is no longer an event key is left as it is.
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <memory>
#include <string>

#include "store/keys.h"
#include "store/store_impl.h"

namespace npuprof::store {

Status MigrateSchema1To2(const std::string& dir, StoreCore* impl) {
  constexpr size_t kBatchEntries = 4096;
  std::unique_ptr<rocksdb::Iterator> it(
      impl->db->NewIterator(rocksdb::ReadOptions(), impl->cf(StoreCore::kGlobal)));
  rocksdb::WriteBatch batch;
  rocksdb::WriteOptions wo;
  wo.sync = impl->opts.sync;
  uint64_t rewritten = 0;
  std::string event;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view v(it->value().data(), it->value().size());
    if (!keys::ParseEventKey(v)) continue;  // already an event (an interrupted migration)
    rocksdb::Status rs = impl->db->Get(rocksdb::ReadOptions(), impl->cf(StoreCore::kEvents),
                                       rocksdb::Slice(v.data(), v.size()), &event);
    if (rs.IsNotFound()) continue;  // not a key after all
    if (!rs.ok()) return FromRocks(rs, "migrate store schema 1 to 2");
    Status s = FromRocks(batch.Put(impl->cf(StoreCore::kGlobal), it->key(), event),
                         "migrate store schema 1 to 2");
    if (!s.ok()) return s;
    if (++rewritten % kBatchEntries == 0) {
      s = FromRocks(impl->db->Write(wo, &batch), "migrate store schema 1 to 2");
      if (!s.ok()) return s;
      batch.Clear();
    }
  }
  Status s = FromRocks(it->status(), "migrate store schema 1 to 2");
  if (!s.ok()) return s;
  s = FromRocks(batch.Put(impl->cf(StoreCore::kMeta), kMetaSchemaVersion, "2"),
                "migrate store schema 1 to 2");
  if (!s.ok()) return s;
  wo.sync = true;  // the version flips only once every rewritten value is durable
  s = FromRocks(impl->db->Write(wo, &batch), "migrate store schema 1 to 2 at " + dir);
  return s;
}

}  // namespace npuprof::store
