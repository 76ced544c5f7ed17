// EventStore: open/close, schema check, reads, blobs and meta.
// The write path (Append, AppendGroup, raw overwrite) is in group_commit.cc.
#include "store/event_store.h"

#include <rocksdb/db.h>
#include <rocksdb/cache.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <algorithm>
#include <charconv>
#include <exception>
#include <filesystem>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/keys.h"
#include "store/rocks_log.h"
#include "store/store_impl.h"

namespace npuprof::store {
namespace {

constexpr const char* kCfNames[StoreCore::kNumCfs] = {"events", "global", "runs", "blobs",
                                                             "meta"};
constexpr size_t kBlockCacheBytes = 64u << 20;  // shared by all column families

std::optional<uint64_t> ParseDecimal(std::string_view s) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Opens the DB with all our column families plus any others already on disk
// (RocksDB refuses to open a DB without naming all of its families).
Status OpenDb(const std::string& dir, StoreCore* impl) {
  rocksdb::DBOptions dbo;
  dbo.create_if_missing = true;
  dbo.create_missing_column_families = true;
  // No LOG file in the store: its writer aborts the process once a full
  // disk made one of its lines fail (rocks_log.h).
  dbo.info_log = MakeRocksLogForwarder();
  // Point lookups (blob, run and meta Gets) check every L0 file: bloom
  // filters skip the files that cannot hold the key.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.block_cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  rocksdb::ColumnFamilyOptions cfo;
  cfo.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));

  std::vector<std::string> names = {rocksdb::kDefaultColumnFamilyName};
  names.insert(names.end(), std::begin(kCfNames), std::end(kCfNames));
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(dbo, dir, &existing).ok()) {
    for (const auto& n : existing) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names) descs.emplace_back(n, cfo);

  rocksdb::DB* raw = nullptr;
  Status s = FromRocks(rocksdb::DB::Open(dbo, dir, descs, &impl->all_handles, &raw),
                       "open store at " + dir);
  if (!s.ok()) return s;
  impl->db.reset(raw);
  for (int c = 0; c < StoreCore::kNumCfs; ++c) {
    impl->handles[c] = impl->all_handles[c + 1];  // [0] is "default"
  }
  return Status::Ok();
}

// Writes the current schema version into a new store, migrates older ones,
// refuses unknown versions.
Status CheckSchema(const std::string& dir, StoreCore* impl) {
  std::string v;
  rocksdb::Status rs = impl->db->Get(rocksdb::ReadOptions(), impl->cf(StoreCore::kMeta),
                                     kMetaSchemaVersion, &v);
  if (rs.IsNotFound()) {
    rocksdb::WriteOptions wo;
    wo.sync = impl->opts.sync;
    return FromRocks(
        impl->db->Put(wo, impl->cf(StoreCore::kMeta), kMetaSchemaVersion, kSchemaVersion),
        "write schema version");
  }
  if (!rs.ok()) return FromRocks(rs, "read schema version");
  auto version = ParseDecimal(v);
  auto supported = *ParseDecimal(kSchemaVersion);
  if (!version || *version == 0) {
    return Status::Corruption("store at " + dir + " has an invalid schema_version '" + v + "'");
  }
  if (*version > supported) {
    return Status::Precondition("store at " + dir + " has schema version " + v +
                                " but this npuprof only knows versions up to " + kSchemaVersion +
                                ": use a newer npuprof");
  }
  if (*version == 1) return MigrateSchema1To2(dir, impl);
  return Status::Ok();
}

// Resumes global positions after max(last global key, next_global_pos - 1).
Status RecoverGlobalPos(StoreCore* impl) {
  uint64_t last = 0;
  std::unique_ptr<rocksdb::Iterator> it(
      impl->db->NewIterator(rocksdb::ReadOptions(), impl->cf(StoreCore::kGlobal)));
  it->SeekToLast();
  if (it->Valid()) {
    auto pos = keys::ParseGlobalKey(std::string_view(it->key().data(), it->key().size()));
    if (!pos) return Status::Corruption("global column family has a malformed key");
    last = *pos;
  }
  Status s = FromRocks(it->status(), "scan global");
  if (!s.ok()) return s;
  std::string v;
  rocksdb::Status rs = impl->db->Get(rocksdb::ReadOptions(), impl->cf(StoreCore::kMeta),
                                     kMetaNextGlobalPos, &v);
  if (rs.ok()) {
    auto next = ParseDecimal(v);
    if (!next || *next == 0) return Status::Corruption("meta next_global_pos '" + v + "' is invalid");
    last = std::max(last, *next - 1);
  } else if (!rs.IsNotFound()) {
    return FromRocks(rs, "read next_global_pos");
  }
  impl->last_global_pos.store(last);
  return Status::Ok();
}

// Bytes of the write-ahead logs in dir: what opening the store replays into
// memtables and flushes to table files before it takes a write.
uint64_t WalBytes(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".log") continue;
    std::error_code size_ec;
    const uintmax_t n = it->file_size(size_ec);
    if (!size_ec) total += n;
  }
  return total;
}

// Refuses to open a store whose file system cannot take its recovery (the
// logs flushed again) and first writes: RocksDB would meet the full disk
// half-way through its own recovery instead.
Status CheckOpenSpace(const std::string& dir, const std::string& label, const StoreOptions& opts) {
  if (opts.min_free_bytes == 0) return Status::Ok();
  std::error_code ec;
  const std::string measured = std::filesystem::exists(dir, ec) ? dir : std::filesystem::path(dir).parent_path().string();
  Result<uint64_t> free = FreeBytes(measured.empty() ? std::string(".") : measured);
  if (!free.ok()) return Status::Ok();  // cannot measure: RocksDB's own error will say
  const uint64_t wal = WalBytes(dir);
  const uint64_t floor = FloorFor(SpaceUse::kProgress, opts.min_free_bytes);
  if (Admits(*free, 0, wal, floor)) return Status::Ok();
  return Status::NoSpace(fmt::format("{}: the store needs {} MB free to open (its recovery and first writes); free "
                                     "space there, then start again",
                                     NoSpaceMessage(label, *free), (floor + wal + (1u << 20) - 1) >> 20));
}

}  // namespace

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  std::string m = what + ": " + s.ToString();
  if (s.IsNotFound()) return Status::NotFound(m);
  if (s.IsCorruption()) return Status::Corruption(m);
  if (s.IsIOError()) return Status::Io(m);
  if (s.IsBusy() || s.IsTryAgain() || s.IsTimedOut()) return Status::Unavailable(m);
  if (s.IsInvalidArgument()) return Status::Invalid(m);
  return Status::Internal(m);
}

Status StoreCore::CheckSpace(uint64_t bytes, SpaceUse use) const {
  if (opts.min_free_bytes == 0) return Status::Ok();
  Result<uint64_t> free = FreeBytes(dir);
  if (!free.ok()) return Status::Ok();  // cannot measure: RocksDB's own error will say
  uint64_t unflushed = 0;
  if (db && !db->GetAggregatedIntProperty("rocksdb.cur-size-all-mem-tables", &unflushed)) unflushed = 0;
  if (Admits(*free, bytes, unflushed, FloorFor(use, opts.min_free_bytes))) return Status::Ok();
  return Status::NoSpace(NoSpaceMessage(label, *free));
}

Status StoreCore::AdmitWrite(uint64_t bytes, SpaceUse use) {
  if (Status s = CheckSpace(bytes, use); !s.ok()) return s;
  if (degraded.load()) {
    // A write failed earlier (a full disk RocksDB met itself): RocksDB keeps
    // refusing writes until it is resumed. Busy = its own recovery is under
    // way; the write then fails again and says so.
    const rocksdb::Status r = db->Resume();
    if (r.ok()) {
      degraded.store(false);
      spdlog::info("store: writes under {} resumed", label);
    }
  }
  return Status::Ok();
}

Status StoreCore::WriteFailed(const rocksdb::Status& s, const std::string& what) {
  degraded.store(true);
  if (s.IsNoSpace()) {
    Result<uint64_t> free = FreeBytes(dir);
    return Status::NoSpace(fmt::format("{} ({}: {})", NoSpaceMessage(label, free.ok() ? *free : 0), what, s.ToString()));
  }
  return FromRocks(s, what);
}

StoreCore::~StoreCore() {
  if (!db) return;
  for (auto* h : all_handles) db->DestroyColumnFamilyHandle(h);
  db->Close();
}

Result<RunTip> StoreCore::ReadTip(const std::string& run_id) const {
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf(kEvents)));
  const std::string prefix = keys::EventPrefix(run_id);
  it->SeekForPrev(keys::EventKey(run_id, UINT64_MAX));
  RunTip tip;
  if (it->Valid() && it->key().starts_with(prefix)) {
    auto parts = keys::ParseEventKey(std::string_view(it->key().data(), it->key().size()));
    proto::Event ev;
    if (!parts || !ev.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return Status::Corruption("last event of run " + run_id + " is unreadable");
    }
    tip.seq = parts->seq;
    tip.hash = ev.hash();
  }
  Status s = FromRocks(it->status(), "read last event of run " + run_id);
  if (!s.ok()) return s;
  return tip;
}

Result<bool> StoreCore::HasFirstEvent(const std::string& run_id) const {
  // A Get, which bloom filters mostly answer for a missing key, costs far
  // less than creating an iterator.
  rocksdb::PinnableSlice first;
  rocksdb::Status rs = db->Get(rocksdb::ReadOptions(), cf(kEvents), keys::EventKey(run_id, 1), &first);
  if (rs.IsNotFound()) return false;
  if (!rs.ok()) return FromRocks(rs, "look up run " + run_id);
  return true;
}

EventStore::EventStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EventStore::~EventStore() = default;

Result<std::unique_ptr<EventStore>> EventStore::Open(const std::string& dir, StoreOptions opts) {
  try {
    auto impl = std::make_unique<Impl>();
    impl->opts = opts;
    impl->dir = dir;
    impl->label = opts.space_label.empty() ? dir : opts.space_label;
    if (Status space = CheckOpenSpace(dir, impl->label, opts); !space.ok()) return space;
    // RocksDB creates it too, but logs an error for a missing directory first.
    std::error_code mkdir_error;
    std::filesystem::create_directories(dir, mkdir_error);
    Status s = OpenDb(dir, impl.get());
    if (s.ok()) s = CheckSchema(dir, impl.get());
    if (s.ok()) s = RecoverGlobalPos(impl.get());
    if (!s.ok()) return s;
    return std::unique_ptr<EventStore>(new EventStore(std::move(impl)));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("open store: ") + e.what());
  }
}

Result<std::vector<proto::Event>> EventStore::ReadRun(const std::string& run_id,
                                                      uint64_t from_seq) const {
  if (!keys::ValidRunId(run_id)) return Status::Invalid("read run: bad run_id");
  std::vector<proto::Event> out;
  const std::string upper = keys::EventUpperBound(run_id);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(Impl::kEvents)));
  {
    // The tip cache (no disk read) says how many events to expect: reserve once.
    std::lock_guard<std::mutex> l(impl_->tip_mu);
    if (auto t = impl_->tips.find(run_id); t != impl_->tips.end() && t->second.seq >= from_seq) {
      out.reserve(std::min<uint64_t>(t->second.seq - std::max<uint64_t>(from_seq, 1) + 1, 1u << 16));
    }
  }
  for (it->Seek(keys::EventKey(run_id, std::max<uint64_t>(from_seq, 1))); it->Valid(); it->Next()) {
    // Parse in place: no temporary message per event.
    if (!out.emplace_back().ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return Status::Corruption("unreadable event in run " + run_id);
    }
  }
  Status s = FromRocks(it->status(), "read run " + run_id);
  if (!s.ok()) return s;
  return out;
}

uint64_t EventStore::LastSeq(const std::string& run_id) const {
  {
    std::lock_guard<std::mutex> l(impl_->tip_mu);
    if (auto it = impl_->tips.find(run_id); it != impl_->tips.end()) return it->second.seq;
  }
  if (!keys::ValidRunId(run_id)) return 0;
  // Not cached: read disk but do not cache (only the leader may fill the cache).
  Result<RunTip> tip = impl_->ReadTip(run_id);
  return tip.ok() ? tip->seq : 0;
}

Result<bool> EventStore::HasEvents(const std::string& run_id) const {
  if (!keys::ValidRunId(run_id)) return false;
  {
    // Exact: only the leader writes events, and it updates the cache after
    // every commit (seq 0 = looked up and found empty).
    std::lock_guard<std::mutex> l(impl_->tip_mu);
    if (auto it = impl_->tips.find(run_id); it != impl_->tips.end()) return it->second.seq > 0;
  }
  // Not cached (e.g. a fresh id, or any run after reopen): a point lookup
  // instead of an iterator.
  return impl_->HasFirstEvent(run_id);
}

// Replay in global order without a point lookup per event. For each chunk of
// global positions: collect the event keys the global CF points to, sort
// them (key order = run, then seq), fetch the values with one iterator over
// the events CF walking forward (a run's consecutive events are neighbours,
// so mostly Next() instead of Seek()), copy each value into the chunk's
// buffer, then parse and visit them in global order with one reused message.
// Errors (a missing or unreadable event) are reported where the global order
// reaches them, after the events before it were visited, exactly as a
// lookup per event would.
Status EventStore::ScanGlobal(uint64_t from_pos,
                              const std::function<bool(const proto::Event&)>& visit) const {
  // Schema 2: the global family holds the events themselves, in order.
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(ro, impl_->cf(Impl::kGlobal)));
  proto::Event ev;  // reused: parsing keeps its string buffers
  for (it->Seek(keys::GlobalKey(from_pos)); it->Valid(); it->Next()) {
    const rocksdb::Slice v = it->value();
    if (!ev.ParseFromArray(v.data(), static_cast<int>(v.size()))) {
      return Status::Corruption("unreadable event in global scan");
    }
    if (!visit(ev)) return Status::Ok();
  }
  return FromRocks(it->status(), "scan global");
}

Result<std::vector<proto::Event>> EventStore::ReadGlobal(uint64_t from_pos, size_t limit) const {
  std::vector<proto::Event> out;
  Status s = ScanGlobal(from_pos, [&](const proto::Event& ev) {
    out.push_back(ev);
    return limit == 0 || out.size() < limit;
  });
  if (!s.ok()) return s;
  return out;
}

uint64_t EventStore::LastGlobalPos() const {
  return impl_->last_global_pos.load(std::memory_order_acquire);
}

std::optional<proto::RunIndexRow> EventStore::GetRun(const std::string& run_id) const {
  rocksdb::PinnableSlice v;
  if (!impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(Impl::kRuns), run_id, &v).ok()) {
    return std::nullopt;
  }
  proto::RunIndexRow row;
  if (!row.ParseFromArray(v.data(), static_cast<int>(v.size()))) return std::nullopt;
  return row;
}

std::vector<proto::RunIndexRow> EventStore::ListRuns(const RunFilter& f) const {
  std::vector<proto::RunIndexRow> out;
  std::unique_ptr<rocksdb::Iterator> it(
      impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(Impl::kRuns)));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    proto::RunIndexRow row;
    if (!row.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) continue;
    if (!f.state.empty() && row.state() != f.state) continue;
    if (!f.kind.empty() && row.kind() != f.kind) continue;
    if (!f.machine.empty() && row.machine() != f.machine) continue;
    if (!f.tag.empty() && row.tag() != f.tag) continue;
    if (f.terminal && row.terminal() != *f.terminal) continue;
    out.push_back(std::move(row));
  }
  return out;
}

Result<std::string> EventStore::PutBlob(const std::string& data) { return PutBlobImpl(data, impl_->opts.sync); }

Result<std::string> EventStore::PutBlobWithNextSync(const std::string& data) { return PutBlobImpl(data, false); }

Result<std::string> EventStore::PutBlobImpl(const std::string& data, bool sync) {
  std::string key = Sha256Hex(data);
  if (key.empty()) return Status::Internal("put blob: sha256 failed");
  std::lock_guard<std::mutex> l(impl_->blob_mu);
  rocksdb::PinnableSlice existing;
  rocksdb::Status rs = impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(Impl::kBlobs), key, &existing);
  if (rs.ok()) return key;  // content-addressed: same key, same bytes
  if (!rs.IsNotFound()) return FromRocks(rs, "put blob");
  if (Status room = impl_->AdmitWrite(data.size(), SpaceUse::kNewWork); !room.ok()) return room;
  rocksdb::WriteOptions wo;
  wo.sync = sync;
  if (rocksdb::Status w = impl_->db->Put(wo, impl_->cf(Impl::kBlobs), key, data); !w.ok())
    return impl_->WriteFailed(w, "put blob");
  if (impl_->blob_count) ++*impl_->blob_count;
  return key;
}

std::optional<std::string> EventStore::GetBlob(const std::string& sha256_hex) const {
  std::string v;
  if (!impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(Impl::kBlobs), sha256_hex, &v).ok()) {
    return std::nullopt;
  }
  return v;
}

size_t EventStore::BlobCount() const {
  std::lock_guard<std::mutex> l(impl_->blob_mu);
  if (!impl_->blob_count) {
    size_t n = 0;
    std::unique_ptr<rocksdb::Iterator> it(
        impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->cf(Impl::kBlobs)));
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    if (!it->status().ok()) return n;  // do not cache a partial count
    impl_->blob_count = n;
  }
  return *impl_->blob_count;
}

Status EventStore::PutMeta(const std::string& key, const std::string& value) {
  if (Status room = impl_->AdmitWrite(key.size() + value.size(), SpaceUse::kProgress); !room.ok()) return room;
  rocksdb::WriteOptions wo;
  wo.sync = impl_->opts.sync;
  if (rocksdb::Status w = impl_->db->Put(wo, impl_->cf(Impl::kMeta), key, value); !w.ok())
    return impl_->WriteFailed(w, "put meta " + key);
  return Status::Ok();
}

Status EventStore::CheckSpace(SpaceUse use) const { return impl_->CheckSpace(0, use); }

std::optional<std::string> EventStore::GetMeta(const std::string& key) const {
  std::string v;
  if (!impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(Impl::kMeta), key, &v).ok()) {
    return std::nullopt;
  }
  return v;
}

}  // namespace npuprof::store
