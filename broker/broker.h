// Broker: owns the event store and the engine loop. One thread runs Run():
// it polls one ROUTER socket (clients and workers, told apart by the header
// frame, see proto/wire.h), turns what arrives into engine inputs, decides,
// appends every decision of one loop turn in one synced group commit, and only
// then dispatches tasks, arms timers and answers clients.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "broker/device_scheduler.h"
#include "broker/dispatcher.h"
#include "broker/listener_security.h"
#include "broker/peer_send_budget.h"
#include "broker/timer_queue.h"
#include "broker/verify_runner.h"
#include "common/status.h"
#include "npuprof.pb.h"
#include "statemachine/engine.h"
#include "statemachine/machine_inventory.h"
#include "store/event_store.h"

namespace npuprof::broker {

class BrokerMetrics;  // broker/metrics.h

struct FaultOptions {
  // Abort the process right after the commit that makes the store's last
  // global position >= this (0 = off). For crash tests.
  uint64_t crash_after_global_pos = 0;
  // Abort right before dispatching a task of this kind (empty = off).
  std::string crash_before_dispatch_kind;
};

struct BrokerOptions {
  std::string data_dir;
  std::vector<std::string> endpoints;  // empty = ipc://<data_dir>/npuprof.sock
  bool sync = true;
  int heartbeat_ms = 1000;
  int heartbeat_liveness = 3;
  FaultOptions faults;
  // The run kinds this broker decides with; nullptr = sm::DefaultKinds().
  // Must outlive the broker. Benchmarks register kinds the server does not
  // serve (e.g. a fan-out of no-op tasks) without adding them to the product.
  const sm::KindRegistry* kinds = nullptr;
  // Who may connect (listener_security.h): CURVE + ZAP once an endpoint is
  // not the data dir's ipc socket; kNone only for benchmarks.
  ListenerSecurity security = ListenerSecurity::kCurveBeyondIpc;
  // Updated at the loop's hook points when set (broker/metrics.h); must
  // outlive the broker. nullptr = no metrics.
  BrokerMetrics* metrics = nullptr;
  // Free space the store keeps under the data dir (store::StoreOptions::
  // min_free_bytes): while less is free, new work (submit, import) is
  // refused and evidence that does not fit fails its task, naming the space.
  uint64_t min_free_bytes = uint64_t{64} << 20;
};

class Broker {
 public:
  static Result<std::unique_ptr<Broker>> Open(const BrokerOptions& opts);
  ~Broker();

  // Runs until stop becomes true. Recovery happens before the first poll.
  Status Run(const std::atomic<bool>& stop);
  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  Broker(BrokerOptions opts, std::unique_ptr<store::EventStore> store);

  // A pending reply to a client, sent after the commit it waits for.
  struct Reply {
    std::string identity;
    proto::ClientResponse response;
    bool read = false;  // a show or manifest waiting for the commit of what it shows
  };
  // Decisions of one loop turn, committed together in one synced batch.
  struct Turn {
    std::map<std::string, uint64_t> expected_seq;            // run -> committed last seq at turn start
    std::map<std::string, std::vector<proto::Event>> staged;  // run -> new events (seq/hash by the store)
    // run -> per staged event, the payload fields AfterCommit acts on (commit.cc;
    // runs only: machine events are applied as stored)
    std::map<std::string, std::vector<sm::json>> follow_ups;
    std::vector<std::pair<std::string, Reply>> replies;       // (run id or "", reply)
    // Runs imported in this turn (run -> the hashes their events carry): they
    // commit with the turn, and nothing follows their events (no tasks,
    // timers, leases or quarantine: they ran elsewhere and are finished).
    std::map<std::string, std::vector<std::string>> imported;
  };

  // ---- loop (dispatch_loop.cc)
  void Recover();
  void HandleMessage(std::vector<std::string>& frames);
  void HandleWorker(const std::string& identity, const std::string& body);
  void CheckWorkers(int64_t now);
  // Decides kWorkerLost for each task the dispatcher reports lost.
  void DecideLost(const std::vector<LostTask>& lost, int64_t now);
  void Send(const std::vector<ToWorker>& messages);
  void FireTimers(int64_t now);
  // Grants (or refuses) devices to queued runs; true when it staged anything.
  bool ScheduleLeases();
  // The scheduler's entry of run_id again from its (cached or stored) state:
  // after a grant or refusal the run did not take.
  void ResyncLease(const std::string& run_id);
  void Dispatch();
  void SendToWorker(const std::string& identity, const proto::BrokerToWorker& msg);
  void SendHeartbeats(int64_t now);

  // ---- decisions and commits (commit.cc)
  sm::RunState* LoadRun(const std::string& run_id);
  // Decides input for run, applies the events to the cached state and stages
  // them in the current turn. Returns the decision's status.
  Status DecideAndStage(const std::string& run_id, const sm::Input& input);
  // After the run's kind threw on `failed`: fails the task of a successful
  // result it could not take, else cancels the run, so that its cleanup runs
  // (commit.cc); a finished run is left alone.
  void CancelAfterKindFailure(const std::string& run_id, const sm::Input& failed, const std::string& what);
  // Rebuilds run_id's cached state, in place, from its committed events plus
  // the events staged for it in this turn (after a rejected input consumed
  // the state); drops it when there is nothing to rebuild from.
  void RebuildCachedRun(const std::string& run_id);
  void StageMachineEvent(const std::string& type, const sm::json& payload, const std::string& cause = "client");
  // Quarantine bookkeeping (device_scheduler.h): a committed machines-stream
  // event into leases_; a committed run event that quarantines or clears.
  void ApplyQuarantineEvent(const proto::Event& e);
  bool MachineAddStaged(const std::string& name) const;  // a MachineAdded of `name` in this turn
  void AfterLeaseEvent(const std::string& run_id, const proto::Event& e, const sm::RunState& s);
  // Stages a device check for each waiter due one; true when it staged any.
  bool AskForQuarantineChecks(const std::vector<DeviceScheduler::Check>& checks, int64_t now);
  void Commit();
  // Runs whose decided events a commit could not store (a full disk): once
  // the store takes writes again, each resumes from its committed events as
  // after a restart (RunRecovered, in-flight tasks re-dispatched, armed
  // timers re-armed), since the inputs of the lost turn (task results, fired
  // timers) are gone. commit.cc.
  void ResumeUnrecordedRuns(int64_t now);
  // Evidence a task result carries, stored before its decision; a blob the
  // store refuses (no space) turns the result into a retryable failure that
  // names why (dispatch_loop.cc).
  void StoreEvidence(const proto::TaskResult& r, sm::Input& in);
  // follow_ups: Turn::follow_ups of the run, in stored's order.
  void AfterCommit(const std::string& run_id, const std::vector<proto::Event>& stored,
                   const std::vector<sm::json>& follow_ups);
  proto::RunIndexRow IndexRowOf(const sm::RunState& s) const;

  // ---- client API (client_api.cc)
  // A verb either answers at once or stages events and sets *deferred_run to
  // the stream whose commit the answer must wait for.
  void HandleClient(const std::string& identity, const std::string& body);
  // The verb's answer (may throw on a malformed request: HandleClient catches).
  proto::ClientResponse Answer(const std::string& verb, const sm::json& args, std::string* deferred_run);
  proto::ClientResponse Submit(const sm::json& args, std::string* deferred_run);
  proto::ClientResponse Show(const sm::json& args, bool manifest);
  proto::ClientResponse Events(const sm::json& args);
  proto::ClientResponse Runs(const sm::json& args);
  proto::ClientResponse Cancel(const sm::json& args, std::string* deferred_run);
  // Decides input on a live run (answers at once for a missing or finished one).
  proto::ClientResponse InputToLiveRun(const std::string& run_id, const sm::Input& in, const sm::json& ack,
                                       std::string* deferred_run);
  proto::ClientResponse MachineVerb(const std::string& verb, const sm::json& args, std::string* deferred_run);
  proto::ClientResponse Workers();
  proto::ClientResponse Blob(const sm::json& args);
  proto::ClientResponse Signal(const sm::json& args, std::string* deferred_run);
  // verify: checks the request and queues a VerifyJob (verify_runner.h); the
  // job starts after this turn's commit and its answer comes from the
  // runner's thread (LaunchVerifies, ReplyToVerifies). Sets *deferred_run to
  // kVerifyLater instead of answering.
  proto::ClientResponse Verify(const sm::json& args, std::string* deferred_run);
  // *deferred_run of a verify: never a stream id (those are safe names).
  static constexpr const char* kVerifyLater = "\x01verify";
  // After a commit: captures the cached runs' projections for each queued
  // verify and hands the job to the runner.
  void LaunchVerifies();
  // Sends the answers the runner has finished.
  void ReplyToVerifies();
  // import: stages the events of a finished run exported by `events --json`
  // in the current turn; the answer waits for its commit.
  proto::ClientResponse Import(const sm::json& args, std::string* deferred_run);
  // Sends watcher the "watched_run_finished" signal about target (staged in the current turn).
  void DeliverWatch(const std::string& watcher, const std::string& target);
  // Registers a watch, or delivers at once when target already ended.
  void AddWatch(const std::string& watcher, const std::string& target);
  // A sweep's children (statemachine/sweep_machine.h): submits the child
  // `child` of `parent` under its derived id (an existing id is left as it
  // is), or cancels it; both after the parent's request committed, and at
  // recovery. broker/child_runs.cc.
  void SubmitChild(const std::string& parent, const std::string& child);
  void CancelChild(const std::string& parent, const std::string& child);
  void RecoverChildren(const std::string& parent);
  // `show` of a sweep: each child's live status while the sweep waits for it.
  void AddLiveChildStatus(sm::json& summary);
  void ReplyNow(const std::string& identity, const proto::ClientResponse& r);

  BrokerOptions opts_;
  std::unique_ptr<store::EventStore> store_;
  const sm::KindRegistry& kinds_;
  zmq::context_t ctx_;
  std::unique_ptr<ZapAuthenticator> zap_;  // declared before router_: outlives it (handshakes need it)
  zmq::socket_t router_;
  PeerSendBudget send_budget_;  // bytes queued per peer, capped (peer_send_budget.h)
  std::vector<std::string> endpoints_;
  zmq::socket_t verify_wake_;               // PULL: the verify runner says an answer is ready
  std::unique_ptr<VerifyRunner> verifier_;  // after store_ and ctx_: stopped and joined before them
  std::vector<VerifyJob> verify_queued_;    // requested in this turn, launched after its commit

  std::map<std::string, sm::RunState> runs_;  // cache: every non-terminal run + recently used
  sm::MachineInventory machines_;
  Dispatcher dispatcher_;  // pending and in-flight tasks, the worker table (dispatcher.h)
  TimerQueue timers_;
  DeviceScheduler leases_;  // from committed lease events (device_scheduler.h)
  // Waiting runs asked to probe quarantined devices: one probe at a time per
  // run, then a back-off (2 s doubling to 60 s) before the next (memory only:
  // after a restart the first probe comes at once).
  struct QuarantineCheck {
    bool in_flight = false;
    int64_t next_ms = 0;
    int64_t delay_ms = 2000;
  };
  std::map<std::string, QuarantineCheck> quarantine_checks_;
  std::map<std::string, std::set<std::string>> watchers_;  // watched run -> runs waiting for its end
  Turn turn_;
  int64_t next_heartbeat_ms_ = 0;
  std::set<std::string> unrecorded_;  // ResumeUnrecordedRuns
  int64_t next_resume_try_ms_ = 0;
};

}  // namespace npuprof::broker
