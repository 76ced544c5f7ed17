// The write path of EventStore: a LevelDB-style writer queue with group commit.
//
// Every writer (Append, AppendGroup, RawOverwriteEventForTest) enqueues itself
// under mu and waits. The writer at the front is the leader: it takes every
// queued append writer (up to kMaxGroupBytes), validates their requests in
// queue order against the tip cache plus the tips produced earlier in the same
// group, builds one WriteBatch, writes it with one sync, publishes the new
// tips, and then marks the whole group done and wakes the next front writer.
// Only the leader touches events/global/runs, so the tip cache is exact.
#include <rocksdb/write_batch.h>

#include <exception>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/keys.h"
#include "store/store_impl.h"

namespace npuprof::store {
namespace {

constexpr size_t kMaxGroupBytes = 8u << 20;  // one group's approximate payload bytes
// The reused batch buffer is dropped after a group that grew it past this,
// so that a burst does not pin its memory for good. Under load the broker's
// loop turns build batches of a few MiB (about 2.7 KB per probe run, hundreds
// of runs per turn); the batch of a full group is about twice kMaxGroupBytes.
constexpr size_t kKeepBatchBytes = 8u << 20;

size_t ApproxBytes(const Writer& w) {
  size_t bytes = 0;
  for (size_t i = 0; i < w.n; ++i) {
    for (const auto& ev : w.reqs[i].events) {
      bytes += 64 + ev.payload_json().size() + ev.type().size() + ev.cause().size();
    }
  }
  return bytes;
}

// Checks everything about a request that does not depend on the store.
Status CheckShape(const AppendRequest& req) {
  if (!keys::ValidRunId(req.run_id)) {
    return Status::Invalid("append: run_id must be non-empty and contain no NUL byte");
  }
  for (const auto& ev : req.events) {
    if (!ev.run_id().empty() && ev.run_id() != req.run_id) {
      return Status::Invalid("append: event run_id '" + ev.run_id() + "' differs from request run_id '" +
                             req.run_id + "'");
    }
  }
  if (req.index && !req.index->run_id().empty() && req.index->run_id() != req.run_id) {
    return Status::Invalid("append: index run_id '" + req.index->run_id() +
                           "' differs from request run_id '" + req.run_id + "'");
  }
  return Status::Ok();
}

// Builds one group's batch. Owned by the leader for the duration of a group.
class GroupBuilder {
 public:
  // Builds into impl->batch (the leader's, emptied here).
  GroupBuilder(StoreCore* impl, uint64_t last_pos) : impl_(impl), batch_(impl->batch), pos_(last_pos) {
    batch_.Clear();
  }
  ~GroupBuilder() {
    if (batch_.Data().capacity() > kKeepBatchBytes) batch_ = rocksdb::WriteBatch();
  }
  GroupBuilder(const GroupBuilder&) = delete;
  GroupBuilder& operator=(const GroupBuilder&) = delete;

  // Adds one request to the batch, or leaves the batch untouched and returns
  // why not. The const overload copies the request's events into *out (and
  // its index row), the other moves them there and completes the index row
  // in place (the caller gave its requests up); either way the stored events
  // are then completed in place.
  Status Add(const AppendRequest& req, std::vector<proto::Event>* out) {
    out->clear();
    Result<RunTip> tip = Admit(req);
    if (!tip.ok()) return tip.status();
    *out = req.events;
    std::optional<proto::RunIndexRow> index = req.index;
    return Stamp(req.run_id, std::move(*tip), out, index ? &*index : nullptr);
  }
  Status Add(AppendRequest&& req, std::vector<proto::Event>* out) {
    out->clear();
    Result<RunTip> tip = Admit(req);
    if (!tip.ok()) return tip.status();
    *out = std::move(req.events);
    return Stamp(req.run_id, std::move(*tip), out, req.index ? &*req.index : nullptr);
  }

  // True when a failed rollback may have left part of a request in the batch:
  // the group must then not be committed.
  bool poisoned() const { return poisoned_; }

  // Writes the batch (if any request was added) and publishes tips and position.
  Status Commit() {
    if (committed_ == 0) return Status::Ok();
    if (!Put(StoreCore::kMeta, kMetaNextGlobalPos, std::to_string(pos_ + 1))) {
      return Status::Internal("append: cannot add next_global_pos to the batch");
    }
    // Runs under way must be able to record their progress (a failure
    // included) while new work is refused: the progress floor.
    if (Status room = impl_->AdmitWrite(batch_.GetDataSize(), SpaceUse::kProgress); !room.ok()) return room;
    rocksdb::WriteOptions wo;
    wo.sync = impl_->opts.sync;
    if (rocksdb::Status w = impl_->db->Write(wo, &batch_); !w.ok()) return impl_->WriteFailed(w, "append write");
    // Committed: from here on nothing may report failure.
    impl_->last_global_pos.store(pos_, std::memory_order_release);
    std::lock_guard<std::mutex> l(impl_->tip_mu);
    try {
      // Hand the nodes over: a run new to the cache costs no allocation.
      while (!pending_.empty()) {
        auto moved = impl_->tips.insert(pending_.extract(pending_.begin()));
        if (!moved.inserted) moved.position->second = std::move(moved.node.mapped());
      }
    } catch (...) {
      impl_->tips.clear();  // out of memory: forget the cache, tips reload from disk
    }
    return Status::Ok();
  }

 private:
  // Checks req's shape and expected seq; returns the run's tip it builds on.
  Result<RunTip> Admit(const AppendRequest& req) {
    Status s = CheckShape(req);
    if (!s.ok()) return s;
    Result<RunTip> tip = Tip(req.run_id, req.expected_last_seq == 0);
    if (!tip.ok()) return tip.status();
    if (tip->seq != req.expected_last_seq) {
      return Status::Conflict("run " + req.run_id + ": expected last seq " +
                              std::to_string(req.expected_last_seq) + " but it is " +
                              std::to_string(tip->seq));
    }
    return tip;
  }

  // Assigns seq, global_pos and hashes to the events in *out (the request's
  // events) and puts them and the request's index row (if any; completed in
  // place) into the batch.
  Status Stamp(const std::string& run_id, RunTip t, std::vector<proto::Event>* out,
               proto::RunIndexRow* index) {
    uint64_t pos = pos_;
    batch_.SetSavePoint();
    std::string& value = value_;
    for (proto::Event& ev : *out) {
      ev.set_run_id(run_id);
      ev.set_seq(++t.seq);
      ev.set_global_pos(++pos);
      ev.set_prev_hash(t.hash);
      ev.set_hash(EventHash(ev));
      t.hash = ev.hash();
      std::string key = keys::EventKey(run_id, ev.seq());
      if (ev.hash().empty() || !ev.SerializeToString(&value) ||
          !Put(StoreCore::kEvents, key, value) ||
          !Put(StoreCore::kGlobal, keys::GlobalKey(pos), value)) {
        return Rollback(out, "append: cannot encode event " + std::to_string(ev.seq()) + " of run " +
                                 run_id);
      }
    }
    if (index != nullptr) {
      index->set_run_id(run_id);
      index->set_last_seq(t.seq);
      if (!index->SerializeToString(&value) || !Put(StoreCore::kRuns, run_id, value)) {
        return Rollback(out, "append: cannot encode index row of run " + run_id);
      }
    }
    batch_.PopSavePoint();
    pending_[run_id] = std::move(t);
    pos_ = pos;
    ++committed_;
    return Status::Ok();
  }

  bool Put(StoreCore::Cf cf, const std::string& key, const std::string& value) {
    return batch_.Put(impl_->cf(cf), key, value).ok();
  }

  Status Rollback(std::vector<proto::Event>* out, std::string why) {
    out->clear();
    if (!batch_.RollbackToSavePoint().ok()) {
      // The batch may now hold part of this request: poison the whole group.
      poisoned_ = true;
    }
    return Status::Internal(std::move(why));
  }

  // Tip of run_id as of this point of the group: pending, then cache, then
  // disk. expect_new: the caller takes the run for new (expected seq 0).
  Result<RunTip> Tip(const std::string& run_id, bool expect_new) {
    if (auto it = pending_.find(run_id); it != pending_.end()) return it->second;
    {
      std::lock_guard<std::mutex> l(impl_->tip_mu);
      if (auto it = impl_->tips.find(run_id); it != impl_->tips.end()) return it->second;
    }
    // Safe to cache: the leader is the only writer and nothing is in flight.
    Result<RunTip> tip = ReadTip(run_id, expect_new);
    if (tip.ok()) {
      std::lock_guard<std::mutex> l(impl_->tip_mu);
      impl_->tips[run_id] = *tip;
    }
    return tip;
  }

 private:
  // The tip on disk. Every new run's first append gets here (it is in no
  // cache yet): when one point lookup shows the run has no events, its tip
  // is (0, "") without building an iterator to find its last event.
  Result<RunTip> ReadTip(const std::string& run_id, bool expect_new) const {
    if (expect_new) {
      Result<bool> has = impl_->HasFirstEvent(run_id);
      if (!has.ok()) return has.status();
      if (!*has) return RunTip{};
    }
    return impl_->ReadTip(run_id);
  }

  StoreCore* impl_;
  rocksdb::WriteBatch& batch_;
  std::unordered_map<std::string, RunTip> pending_;
  std::string value_;  // serialisation buffer, reused by every event and row of the group
  uint64_t pos_;
  size_t committed_ = 0;
  bool poisoned_ = false;
};

}  // namespace

void StoreCore::Write(Writer* w) {
  std::unique_lock<std::mutex> l(mu);
  writers.push_back(w);
  while (!w->done && w != writers.front()) w->cv.wait(l);
  if (w->done) return;  // a leader committed (or failed) our requests

  // We lead: take the queued writers. A raw writer always forms its own group.
  std::vector<Writer*> group;
  size_t bytes = 0;
  for (Writer* x : writers) {
    if (!group.empty() && (x->raw != nullptr || group.front()->raw != nullptr)) break;
    size_t b = x->raw ? 0 : ApproxBytes(*x);
    if (!group.empty() && bytes + b > kMaxGroupBytes) break;
    group.push_back(x);
    bytes += b;
  }
  l.unlock();
  LeadGroup(group);
  l.lock();
  for (Writer* x : group) {
    writers.pop_front();  // group is the queue's prefix
    x->done = true;
    if (x != w) x->cv.notify_one();  // under mu: x cannot return (and die) before we let go
  }
  if (!writers.empty()) writers.front()->cv.notify_one();
}

void StoreCore::LeadGroup(std::vector<Writer*>& group) {
  if (group.front()->raw != nullptr) {
    Writer* w = group.front();
    rocksdb::WriteOptions wo;
    wo.sync = opts.sync;
    w->raw_status = FromRocks(db->Write(wo, w->raw), "raw write");
    std::lock_guard<std::mutex> l(tip_mu);
    tips.erase(w->raw_run_id);  // reload from disk on next use
    return;
  }
  try {
    GroupBuilder builder(this, last_global_pos.load(std::memory_order_acquire));
    for (Writer* w : group) {
      for (size_t i = 0; i < w->n; ++i) {
        std::vector<proto::Event>* out = &(*w->out)[i];
        (*w->statuses)[i] = w->movable_reqs ? builder.Add(std::move(w->movable_reqs[i]), out)
                                            : builder.Add(w->reqs[i], out);
      }
    }
    Status s = builder.poisoned() ? Status::Internal("append: batch rollback failed")
                                  : builder.Commit();
    if (s.ok()) return;
    for (Writer* w : group) {
      for (size_t i = 0; i < w->n; ++i) {
        if ((*w->statuses)[i].ok()) {
          (*w->statuses)[i] = s;
          (*w->out)[i].clear();
        }
      }
    }
  } catch (const std::exception& e) {
    // Nothing was written (the write itself does not throw): fail the group.
    for (Writer* w : group) {
      for (size_t i = 0; i < w->n; ++i) {
        (*w->statuses)[i] = Status::Internal(std::string("append: ") + e.what());
        (*w->out)[i].clear();
      }
    }
  }
}

Status EventStore::Append(const AppendRequest& req, std::vector<proto::Event>* stored) {
  std::vector<Status> statuses(1);
  std::vector<std::vector<proto::Event>> out(1);
  Writer w;
  w.reqs = &req;
  w.n = 1;
  w.statuses = &statuses;
  w.out = &out;
  impl_->Write(&w);
  if (stored != nullptr) *stored = std::move(out[0]);
  return statuses[0];
}

std::vector<Status> EventStore::AppendGroup(const std::vector<AppendRequest>& reqs,
                                            std::vector<std::vector<proto::Event>>* stored) {
  return AppendGroupImpl(reqs.data(), nullptr, reqs.size(), stored);
}

std::vector<Status> EventStore::AppendGroup(std::vector<AppendRequest>&& reqs,
                                            std::vector<std::vector<proto::Event>>* stored) {
  return AppendGroupImpl(reqs.data(), reqs.data(), reqs.size(), stored);
}

std::vector<Status> EventStore::AppendGroupImpl(const AppendRequest* reqs, AppendRequest* movable_reqs,
                                                size_t n,
                                                std::vector<std::vector<proto::Event>>* stored) {
  std::vector<Status> statuses(n);
  std::vector<std::vector<proto::Event>> out(n);
  if (n > 0) {
    Writer w;
    w.reqs = reqs;
    w.movable_reqs = movable_reqs;
    w.n = n;
    w.statuses = &statuses;
    w.out = &out;
    impl_->Write(&w);
  }
  if (stored != nullptr) *stored = std::move(out);
  return statuses;
}

Status EventStore::RawOverwriteEventForTest(const proto::Event& ev) {
  if (!keys::ValidRunId(ev.run_id())) return Status::Invalid("raw overwrite: bad run_id");
  std::string value;
  if (!ev.SerializeToString(&value)) return Status::Internal("raw overwrite: cannot encode event");
  rocksdb::WriteBatch batch;
  const std::string key = keys::EventKey(ev.run_id(), ev.seq());
  Status s = FromRocks(batch.Put(impl_->cf(Impl::kEvents), key, value), "raw overwrite");
  if (!s.ok()) return s;
  // The global family's copy too, when that position holds this very event
  // (so both readers see the same tampered bytes).
  std::string old;
  const std::string gkey = keys::GlobalKey(ev.global_pos());
  proto::Event there;
  if (impl_->db->Get(rocksdb::ReadOptions(), impl_->cf(Impl::kGlobal), gkey, &old).ok() &&
      there.ParseFromString(old) && there.run_id() == ev.run_id() && there.seq() == ev.seq()) {
    s = FromRocks(batch.Put(impl_->cf(Impl::kGlobal), gkey, value), "raw overwrite");
    if (!s.ok()) return s;
  }
  Writer w;
  w.raw = &batch;
  w.raw_run_id = ev.run_id();
  impl_->Write(&w);
  return w.raw_status;
}

}  // namespace npuprof::store
