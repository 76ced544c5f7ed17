// Private state of EventStore shared by event_store.cc (open, reads, blobs)
// and group_commit.cc (the write path). Not part of the public API.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/event_store.h"

namespace npuprof::store {

inline constexpr const char* kSchemaVersion = "2";
inline constexpr const char* kMetaSchemaVersion = "schema_version";
inline constexpr const char* kMetaNextGlobalPos = "next_global_pos";

// Last seq and hash of a run (seq 0, hash "" for a run without events).
struct RunTip {
  uint64_t seq = 0;
  std::string hash;
};

// One caller waiting in the writer queue. Exactly one of reqs / raw is set.
struct Writer {
  const AppendRequest* reqs = nullptr;  // reqs[0..n) are validated and appended
  // The same array when the caller gave its requests up (AppendGroup(&&)):
  // the leader then moves their events into the output instead of copying.
  AppendRequest* movable_reqs = nullptr;
  size_t n = 0;
  std::vector<Status>* statuses = nullptr;             // size n, filled by the leader
  std::vector<std::vector<proto::Event>>* out = nullptr;  // size n, filled on success
  rocksdb::WriteBatch* raw = nullptr;  // written as-is, alone in its group
  std::string raw_run_id;              // run whose cached tip the raw write invalidates
  Status raw_status;
  bool done = false;
  std::condition_variable cv;
};

// Maps a RocksDB status to ours; what names the operation for the message.
Status FromRocks(const rocksdb::Status& s, const std::string& what);

// Everything EventStore owns; EventStore::Impl is this (the nested name is
// private, so free helpers use StoreCore).
struct StoreCore {
  StoreOptions opts;
  std::string dir;    // the store's directory (its free space is measured here)
  std::string label;  // named in no-space messages (opts.space_label, else dir)
  std::unique_ptr<rocksdb::DB> db;
  // Every open column family handle (including "default" and any unknown
  // ones found on disk); owned, destroyed before db is closed.
  std::vector<rocksdb::ColumnFamilyHandle*> all_handles;
  // Our column families, indexed by Cf (pointers into all_handles).
  enum Cf { kEvents = 0, kGlobal, kRuns, kBlobs, kMeta, kNumCfs };
  rocksdb::ColumnFamilyHandle* handles[kNumCfs] = {};
  rocksdb::ColumnFamilyHandle* cf(Cf c) const { return handles[c]; }

  // Writer queue: the front writer is the leader and the only thread writing
  // events/global/runs; it holds no lock while building and writing a batch.
  std::mutex mu;
  std::deque<Writer*> writers;
  // The leader's batch, reused by every group so that its buffer keeps its
  // capacity: building a fresh one regrew (reallocated, copied, page-faulted)
  // it per group. Touched only by the leader.
  rocksdb::WriteBatch batch;

  // Tip cache: written only by the leader, read by the leader and LastSeq.
  mutable std::mutex tip_mu;
  std::unordered_map<std::string, RunTip> tips;

  // Last assigned global position; written only by the leader after a commit.
  std::atomic<uint64_t> last_global_pos{0};

  // Blob writes are serialised so that the existence check and the count agree.
  std::mutex blob_mu;
  std::optional<size_t> blob_count;  // computed on first BlobCount()

  StoreCore() = default;
  StoreCore(const StoreCore&) = delete;
  StoreCore& operator=(const StoreCore&) = delete;
  ~StoreCore();

  // Reads the tip of run_id from the events CF (no cache).
  Result<RunTip> ReadTip(const std::string& run_id) const;
  // Whether run_id has any event in the events CF (no cache): one point
  // lookup of its seq-1 key, which every run with events has (appends number
  // a run's events from 1 and nothing deletes events).
  Result<bool> HasFirstEvent(const std::string& run_id) const;
  // Runs a writer through the queue (leader or follower) until it is done.
  void Write(Writer* w);

  // Space (disk_space.h): Ok when a write of `bytes` for `use` fits, else
  // kNoSpace. After a failed write (degraded) it also resumes RocksDB once
  // the write fits again.
  Status AdmitWrite(uint64_t bytes, SpaceUse use);
  Status CheckSpace(uint64_t bytes, SpaceUse use) const;
  // A RocksDB write failed: its status as ours (kNoSpace for a full disk),
  // and the store is degraded until a resume succeeds.
  Status WriteFailed(const rocksdb::Status& s, const std::string& what);
  std::atomic<bool> degraded{false};

 private:
  void LeadGroup(std::vector<Writer*>& group);
};

struct EventStore::Impl : StoreCore {};

// Rewrites a schema-1 store into schema 2 (schema_migration.cc).
Status MigrateSchema1To2(const std::string& dir, StoreCore* impl);

}  // namespace npuprof::store
