// Dispatcher: the broker's task bookkeeping. It knows which tasks wait for a
// worker (pending, in scheduling order), which worker holds which attempt of
// a task and until when its lease runs (in flight), and the live workers
// (worker_registry.h).
//
// The broker's loop tells it what happened — a worker's message, the clock,
// a committed TaskScheduled / TaskRedispatched / TaskAbandoned — and carries
// out what it returns: messages for workers (tasks, cancels) and tasks whose
// holder is gone (the loop decides a kWorkerLost input for each). It has no
// socket, no store and no clock of its own: every call that needs the time
// takes `now_ms`. Not thread-safe: the loop's thread only.
//
// Its promises:
//  * a task id is held by at most one worker; scheduling a new attempt of a
//    held task, or abandoning it, tells the holder to cancel and frees its
//    slot (the one place this happens);
//  * a result counts only from the worker that was given that task for that
//    run; the holder's slot is freed by a result of the attempt it holds;
//  * a worker that announces itself again, goes silent past its expiry, or
//    holds a task past the task's lease loses the task: it is returned as
//    lost exactly once, and (for an expired lease) its holder is told to
//    cancel.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "broker/worker_registry.h"
#include "npuprof.pb.h"
#include "statemachine/run_state.h"

namespace npuprof::broker {

// A message the loop sends to one worker.
struct ToWorker {
  std::string identity;
  proto::BrokerToWorker msg;
};

// A task whose holder is gone: the loop decides kWorkerLost for it.
struct LostTask {
  std::string run_id;
  std::string task_id;
  uint32_t attempt = 0;
  std::string worker;  // the holder's worker id, with " (lease expired)" for a lease
  bool lease_expired = false;
};

class Dispatcher {
 public:
  // ---- what workers say
  // A worker announced itself (ready). If it was known and held tasks, it
  // has forgotten them: they are lost.
  std::vector<LostTask> WorkerReady(const std::string& identity, const proto::WorkerReady& ready, int64_t expires_ms);
  // Any other message from identity extends its life; nullptr = not a known
  // worker (the loop tells it to disconnect).
  WorkerEntry* Alive(const std::string& identity, int64_t expires_ms);
  // Progress on the attempt it holds extends that task's lease.
  void Progress(const std::string& task_id, uint32_t attempt, int64_t now_ms);
  struct Answer {
    bool decide = false;  // false: the peer was never given this task (for this run): drop it
    // Set when it answered the attempt it holds: the task kind and how long it ran.
    std::optional<std::pair<std::string, std::chrono::steady_clock::duration>> timing;
  };
  Answer Result(const std::string& identity, const std::string& run_id, const std::string& task_id, uint32_t attempt);

  // ---- the clock
  // Workers silent past their expiry (removed; what they held is lost) and
  // tasks held past their lease (lost; the holder is told to cancel).
  std::vector<LostTask> Expire(int64_t now_ms, std::vector<ToWorker>* out);

  // ---- committed events
  // A task (re)scheduled: an older attempt's holder is told to stop; the task
  // waits for a worker.
  void Schedule(const std::string& run_id, const std::string& task_id, const std::string& kind,
                std::vector<ToWorker>* out);
  // A task abandoned: its holder (if any) is told to stop.
  void Abandon(const std::string& task_id, std::vector<ToWorker>* out);

  // ---- dispatch
  // The task as its run holds it now, or nullptr when it is not to be sent
  // (run gone or finished, task no longer in flight): it is then dropped.
  using Lookup = std::function<const sm::TaskInfo*(const std::string& run_id, const std::string& task_id)>;
  // Called with the task kind right before a task is sent (fault injection).
  using BeforeSend = std::function<void(const std::string& kind)>;
  // Walks the pending tasks in order while some worker has a free slot and
  // gives each to the least-loaded worker serving its kind. Once no worker
  // can take a kind, later tasks of that kind are skipped without a lookup:
  // with every slot taken, a turn costs nothing however many tasks wait.
  void Dispatch(int64_t now_ms, const Lookup& lookup, const BeforeSend& before_send, std::vector<ToWorker>* out);

  // ---- reading
  const WorkerRegistry& workers() const { return workers_; }
  size_t pending() const { return pending_.size(); }
  size_t in_flight() const { return in_flight_.size(); }

 private:
  struct Pending {
    std::string run_id;
    std::string task_id;
    std::string kind;  // so Dispatch can skip kinds no worker can take without a lookup
  };
  struct Held {
    std::string run_id;
    std::string worker_identity;
    uint32_t attempt = 0;
    int64_t lease_deadline_ms = 0;
    int64_t lease_ms = 0;
    std::string kind;
    std::chrono::steady_clock::time_point dispatched_at;
  };
  // Drops task_id from in flight; its holder, if still known, frees the slot
  // and is told to cancel.
  void CancelHolder(const std::string& task_id, std::vector<ToWorker>* out);
  // Every task w holds is lost (dropped from in flight).
  void LoseHeldTasks(const WorkerEntry& w, std::vector<LostTask>* lost);

  WorkerRegistry workers_;
  std::list<Pending> pending_;
  std::map<std::string, Held> in_flight_;  // task id -> holder
};

}  // namespace npuprof::broker
