// EventStore: the durable event log of every run, on RocksDB.
//
// Column families:
//   events   key = run_id '\0' seq(8 bytes big-endian)    value = proto::Event
//   global   key = global_pos (8 bytes big-endian)         value = proto::Event (the same bytes)
//   runs     key = run_id                                  value = proto::RunIndexRow
//   blobs    key = sha256 hex                              value = raw bytes
//   meta     key = name                                    value = bytes ("schema_version" = "2",
//                                                                 "next_global_pos", ...)
//   Every event is written twice in its batch: per run (ReadRun, tips) and in
//   global order (ScanGlobal: a replay is one sequential scan). Schema 1 kept
//   only the event key in global; such a store is migrated at open
//   (schema_migration.cc).
//   Integers in meta values are decimal ASCII. next_global_pos (the next
//   position to assign) is rewritten in every append batch; at open the store
//   resumes after max(next_global_pos - 1, last key of global).
//
// Contracts:
//  * Append/AppendGroup write every event and index row of a request in one
//    synced WriteBatch: after they return Ok the events survive a crash of
//    the process or the machine; on failure nothing of that request is visible.
//  * expected_last_seq must equal the run's current last sequence (0 for a
//    new run) or the request fails with Code::kConflict and writes nothing.
//  * Events passed in carry run_id, type, time_ms, payload_json and cause; the
//    store assigns seq, global_pos, prev_hash and hash. An event's run_id may
//    be empty (the request's is used); a different one is kInvalidArgument,
//    as is a run_id that is empty or contains '\0'.
//  * Concurrent callers of Append are group-committed: one leader writes the
//    batches of all waiting callers with one sync (LevelDB writer queue).
//  * A full disk is an error, never an abort: every write is first measured
//    against StoreOptions::min_free_bytes (store/disk_space.h) and refused
//    with Code::kNoSpace ("no space left on device under DIR (N MB free)")
//    when it does not fit; a write RocksDB itself fails for lack of space
//    gets the same code. After such a failure the store resumes RocksDB
//    once space is back, before its next write. Open refuses (kNoSpace) a
//    file system that cannot take the store's recovery and first writes.
//  * Thread-safe (except destruction: no call may be in flight then).
//  * The store keeps the last seq and hash of every run it has appended to
//    in memory, so validating an append needs no read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "npuprof.pb.h"
#include "store/disk_space.h"

namespace npuprof::store {

struct AppendRequest {
  std::string run_id;
  uint64_t expected_last_seq = 0;
  std::vector<proto::Event> events;        // in order; seq/hash filled by the store
  // Written in the same batch when set. The store fills index.run_id when
  // empty (a different run_id is kInvalidArgument) and sets index.last_seq to
  // the run's last seq after this request.
  std::optional<proto::RunIndexRow> index;
};

struct RunFilter {
  std::string state;    // empty = any
  std::string kind;     // empty = any
  std::string machine;  // empty = any
  std::string tag;      // empty = any
  std::optional<bool> terminal;
};

struct StoreOptions {
  bool sync = true;  // fsync every commit (tests and benches may turn it off)
  // Free space the store keeps on its file system (store/disk_space.h): a
  // write that would leave less is refused as Code::kNoSpace before RocksDB
  // sees it; new work needs all of it, progress of runs under way half.
  // 0 = no check (RocksDB then meets a full disk itself: its error is still
  // a kNoSpace status, never an abort).
  uint64_t min_free_bytes = uint64_t{64} << 20;
  // The directory named in "no space left on device under DIR"; empty = the
  // store's own.
  std::string space_label;
};

class EventStore {
 public:
  static Result<std::unique_ptr<EventStore>> Open(const std::string& dir, StoreOptions opts = {});
  ~EventStore();
  EventStore(const EventStore&) = delete;
  EventStore& operator=(const EventStore&) = delete;

  // One request, one synced batch (group-committed with concurrent callers).
  // On success the stored events (with seq, global_pos, hashes) are written to *stored if non-null.
  Status Append(const AppendRequest& req, std::vector<proto::Event>* stored = nullptr);

  // Several runs' requests in one synced batch. Requests are checked one by one:
  // a conflicting request is skipped (its status says why) while the others commit.
  // stored (if non-null) receives per-request stored events.
  std::vector<Status> AppendGroup(const std::vector<AppendRequest>& reqs,
                                  std::vector<std::vector<proto::Event>>* stored = nullptr);
  // The same for a caller that gives its requests up: their events are moved
  // into *stored instead of copied, and their index rows are completed in
  // place (reqs are left in an unspecified state).
  std::vector<Status> AppendGroup(std::vector<AppendRequest>&& reqs,
                                  std::vector<std::vector<proto::Event>>* stored = nullptr);

  // Events of one run with from_seq <= seq, in order.
  Result<std::vector<proto::Event>> ReadRun(const std::string& run_id, uint64_t from_seq = 1) const;
  uint64_t LastSeq(const std::string& run_id) const;
  // True when run_id has at least one stored event, i.e. when ReadRun would
  // return events: the broker's test whether an id is taken. Cheap: the tip
  // cache, else one point lookup of the run's event seq 1 (every append path
  // numbers a run's events from 1, runs and the machines stream alike, and no
  // event is ever deleted; only RawOverwriteEventForTest can write other
  // seqs alone), no iterator. An invalid id never has events.
  Result<bool> HasEvents(const std::string& run_id) const;
  // Events of all runs in global order with global_pos >= from_pos; at most limit (0 = all).
  Result<std::vector<proto::Event>> ReadGlobal(uint64_t from_pos, size_t limit = 0) const;
  // Visit every event in global order without materialising them all; visit
  // returns false to stop early. Reads one consistent snapshot.
  Status ScanGlobal(uint64_t from_pos, const std::function<bool(const proto::Event&)>& visit) const;
  uint64_t LastGlobalPos() const;

  std::optional<proto::RunIndexRow> GetRun(const std::string& run_id) const;
  std::vector<proto::RunIndexRow> ListRuns(const RunFilter& filter = {}) const;

  // Content-addressed blobs: returns the sha256 hex; storing the same bytes twice keeps one copy.
  // Synced per the store's options.
  Result<std::string> PutBlob(const std::string& data);
  // The same, without its own sync: the blob goes into the write-ahead log
  // (one sequential log for every column family) and is durable once any
  // later synced write returns — e.g. the group commit of the events that
  // reference it. Lost together with those events, never after them.
  Result<std::string> PutBlobWithNextSync(const std::string& data);
  std::optional<std::string> GetBlob(const std::string& sha256_hex) const;
  size_t BlobCount() const;

  Status PutMeta(const std::string& key, const std::string& value);

  // Ok when a write for `use` of a few bytes would be admitted now, else the
  // kNoSpace refusal it would get (the broker asks before taking new work).
  Status CheckSpace(SpaceUse use) const;
  std::optional<std::string> GetMeta(const std::string& key) const;

  // Test hook for corruption tests: overwrite a stored event as-is (no checks, no hashing).
  // Meant for runs that have events (a run is found by its event seq 1).
  Status RawOverwriteEventForTest(const proto::Event& ev);

 private:
  struct Impl;
  explicit EventStore(std::unique_ptr<Impl> impl);
  Result<std::string> PutBlobImpl(const std::string& data, bool sync);
  // movable_reqs: reqs itself when its events may be moved, else null.
  std::vector<Status> AppendGroupImpl(const AppendRequest* reqs, AppendRequest* movable_reqs, size_t n,
                                      std::vector<std::vector<proto::Event>>* stored);
  std::unique_ptr<Impl> impl_;
};

// sha256 hex of data (OpenSSL).
std::string Sha256Hex(const std::string& data);
// The event hash as defined in npuprof.proto (Event.hash). Exact encoding,
// so that `npuprof verify` (or any other tool) can recompute it:
//   hash = lowercase sha256 hex of the concatenation of 7 netstrings
//          N(prev_hash) N(run_id) N(seq) N(type) N(time_ms) N(payload_json) N(cause)
//   where N(x) = <decimal byte length of x> ':' <bytes of x> ','
//   seq and time_ms are rendered in decimal ASCII (time_ms with a leading '-'
//   when negative), strings as their raw bytes. The first event of a run has
//   prev_hash = "" (encoded "0:,"); global_pos and hash itself are not hashed.
// Example: prev_hash "", run_id "r1", seq 1, type "t", time_ms 5, payload "{}",
//   cause "c" hashes the bytes  0:,2:r1,1:1,1:t,1:5,2:{},1:c,
std::string EventHash(const proto::Event& ev);

}  // namespace npuprof::store
