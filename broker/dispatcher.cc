#include "broker/dispatcher.h"

#include <algorithm>
#include <set>

namespace npuprof::broker {

namespace {

ToWorker CancelMessage(const std::string& identity, const std::string& task_id) {
  ToWorker m{identity, {}};
  m.msg.set_cancel_task_id(task_id);
  return m;
}

}  // namespace

std::vector<LostTask> Dispatcher::WorkerReady(const std::string& identity, const proto::WorkerReady& ready,
                                              int64_t expires_ms) {
  std::vector<LostTask> lost;
  if (WorkerEntry* known = workers_.Find(identity); known && !known->tasks.empty()) LoseHeldTasks(*known, &lost);
  WorkerEntry& e = workers_.Upsert(identity);
  e.worker_id = ready.worker_id();
  e.pid = ready.pid();
  e.kinds = {ready.task_kinds().begin(), ready.task_kinds().end()};
  e.capacity = std::max(1, ready.capacity());
  e.tasks.clear();
  e.expires_ms = expires_ms;
  return lost;
}

WorkerEntry* Dispatcher::Alive(const std::string& identity, int64_t expires_ms) {
  WorkerEntry* w = workers_.Find(identity);
  if (w) w->expires_ms = expires_ms;
  return w;
}

void Dispatcher::Progress(const std::string& task_id, uint32_t attempt, int64_t now_ms) {
  auto it = in_flight_.find(task_id);
  if (it != in_flight_.end() && it->second.attempt == attempt) it->second.lease_deadline_ms = now_ms + it->second.lease_ms;
}

Dispatcher::Answer Dispatcher::Result(const std::string& identity, const std::string& run_id,
                                      const std::string& task_id, uint32_t attempt) {
  Answer a;
  WorkerEntry* w = workers_.Find(identity);
  if (!w || !w->tasks.count(task_id)) return a;
  auto it = in_flight_.find(task_id);
  if (it != in_flight_.end() && it->second.run_id != run_id) return a;
  a.decide = true;
  const bool held_here = it != in_flight_.end() && it->second.worker_identity == identity;
  if (held_here && it->second.attempt == attempt) {
    a.timing.emplace(it->second.kind, std::chrono::steady_clock::now() - it->second.dispatched_at);
    in_flight_.erase(it);
    w->tasks.erase(task_id);
  } else if (!held_here) {
    w->tasks.erase(task_id);
  }
  // else: a stale attempt's result from a worker that now holds a newer
  // attempt of the same task: it keeps that slot (and the task is lost from
  // there if the worker is).
  return a;
}

void Dispatcher::LoseHeldTasks(const WorkerEntry& w, std::vector<LostTask>* lost) {
  for (const auto& task_id : std::set<std::string>(w.tasks)) {
    auto it = in_flight_.find(task_id);
    if (it == in_flight_.end()) continue;
    lost->push_back(LostTask{it->second.run_id, task_id, it->second.attempt, w.worker_id});
    in_flight_.erase(it);
  }
}

std::vector<LostTask> Dispatcher::Expire(int64_t now_ms, std::vector<ToWorker>* out) {
  std::vector<LostTask> lost;
  for (const auto& identity : workers_.Expired(now_ms)) {
    if (const WorkerEntry* w = workers_.Find(identity)) LoseHeldTasks(*w, &lost);
    workers_.Remove(identity);
  }
  std::vector<std::string> expired;
  for (const auto& [task_id, h] : in_flight_)
    if (h.lease_deadline_ms < now_ms) expired.push_back(task_id);
  for (const auto& task_id : expired) {
    const Held h = in_flight_[task_id];
    const WorkerEntry* w = workers_.Find(h.worker_identity);
    lost.push_back(
        LostTask{h.run_id, task_id, h.attempt, (w ? w->worker_id : std::string()) + " (lease expired)", true});
    CancelHolder(task_id, out);
  }
  return lost;
}

void Dispatcher::CancelHolder(const std::string& task_id, std::vector<ToWorker>* out) {
  auto it = in_flight_.find(task_id);
  if (it == in_flight_.end()) return;
  if (WorkerEntry* w = workers_.Find(it->second.worker_identity)) {
    w->tasks.erase(task_id);
    out->push_back(CancelMessage(w->identity, task_id));
  }
  in_flight_.erase(it);
}

void Dispatcher::Schedule(const std::string& run_id, const std::string& task_id, const std::string& kind,
                          std::vector<ToWorker>* out) {
  CancelHolder(task_id, out);  // an older attempt is still held somewhere: its holder stops
  pending_.push_back(Pending{run_id, task_id, kind});
}

void Dispatcher::Abandon(const std::string& task_id, std::vector<ToWorker>* out) { CancelHolder(task_id, out); }

void Dispatcher::Dispatch(int64_t now_ms, const Lookup& lookup, const BeforeSend& before_send,
                          std::vector<ToWorker>* out) {
  if (pending_.empty() || !workers_.AnyFreeSlot()) return;
  std::set<std::string, std::less<>> no_worker;  // kinds no live worker can take this turn
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!it->kind.empty() && no_worker.count(it->kind)) {
      ++it;
      continue;
    }
    const sm::TaskInfo* t = lookup(it->run_id, it->task_id);
    if (!t || in_flight_.count(it->task_id)) {
      it = pending_.erase(it);
      continue;
    }
    WorkerEntry* w = workers_.PickFor(t->kind);
    if (!w) {
      no_worker.insert(t->kind);
      ++it;
      continue;
    }
    if (before_send) before_send(t->kind);
    ToWorker m{w->identity, {}};
    proto::Task* task = m.msg.mutable_task();
    task->set_task_id(t->task_id);
    task->set_run_id(it->run_id);
    task->set_kind(t->kind);
    task->set_attempt(t->attempt);
    task->set_payload_json(t->payload.dump());
    task->set_lease_ms(t->policy.lease_ms);
    out->push_back(std::move(m));
    in_flight_[t->task_id] = Held{it->run_id, w->identity, t->attempt, now_ms + t->policy.lease_ms,
                                  t->policy.lease_ms, t->kind, std::chrono::steady_clock::now()};
    w->tasks.insert(t->task_id);
    it = pending_.erase(it);
    if (!workers_.AnyFreeSlot()) break;
  }
}

}  // namespace npuprof::broker
