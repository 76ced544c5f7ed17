// EventStore: the durable event log of every run, on RocksDB.
//
// Column families:
//   events   key = run_id '\0' seq(8 bytes big-endian)    value = proto::Event
//   global   key = global_pos (8 bytes big-endian)         value = run_id '\0' seq
//   runs     key = run_id                                  value = proto::RunIndexRow
//   blobs    key = sha256 hex                              value = raw bytes
//   meta     key = name                                    value = bytes ("schema_version" = "1",
//                                                                 "next_global_pos", ...)
//
// Contracts:
//  * Append/AppendGroup write every event and index row of a request in one
//    synced WriteBatch: after they return Ok the events survive a crash of
//    the process or the machine; on failure nothing of that request is visible.
//  * expected_last_seq must equal the run's current last sequence (0 for a
//    new run) or the request fails with Code::kConflict and writes nothing.
//  * Events passed in carry run_id, type, time_ms, payload_json and cause; the
//    store assigns seq, global_pos, prev_hash and hash.
//  * Concurrent callers of Append are group-committed: one leader writes the
//    batches of all waiting callers with one sync (LevelDB writer queue).
//  * Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "npuprof.pb.h"

namespace npuprof::store {

struct AppendRequest {
  std::string run_id;
  uint64_t expected_last_seq = 0;
  std::vector<proto::Event> events;        // in order; seq/hash filled by the store
  std::optional<proto::RunIndexRow> index; // written in the same batch when set
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

  // Events of one run with from_seq <= seq, in order.
  Result<std::vector<proto::Event>> ReadRun(const std::string& run_id, uint64_t from_seq = 1) const;
  uint64_t LastSeq(const std::string& run_id) const;
  // Events of all runs in global order with global_pos >= from_pos; at most limit (0 = all).
  Result<std::vector<proto::Event>> ReadGlobal(uint64_t from_pos, size_t limit = 0) const;
  // Visit every event in global order without materialising them all.
  Status ScanGlobal(uint64_t from_pos, const std::function<bool(const proto::Event&)>& visit) const;
  uint64_t LastGlobalPos() const;

  std::optional<proto::RunIndexRow> GetRun(const std::string& run_id) const;
  std::vector<proto::RunIndexRow> ListRuns(const RunFilter& filter = {}) const;

  // Content-addressed blobs: returns the sha256 hex; storing the same bytes twice keeps one copy.
  Result<std::string> PutBlob(const std::string& data);
  std::optional<std::string> GetBlob(const std::string& sha256_hex) const;
  size_t BlobCount() const;

  Status PutMeta(const std::string& key, const std::string& value);
  std::optional<std::string> GetMeta(const std::string& key) const;

  // Test hook for corruption tests: overwrite a stored event as-is (no checks, no hashing).
  Status RawOverwriteEventForTest(const proto::Event& ev);

 private:
  struct Impl;
  explicit EventStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// sha256 hex of data (OpenSSL).
std::string Sha256Hex(const std::string& data);
// The event hash as defined in npuprof.proto (Event.hash).
std::string EventHash(const proto::Event& ev);

}  // namespace npuprof::store
