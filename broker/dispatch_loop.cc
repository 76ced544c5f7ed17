// The broker's loop: poll, turn messages/timers/expiries into inputs, commit
// once per turn, dispatch. Heartbeats and expiry are plain data handled here.
#include <csignal>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "broker/listen_endpoint.h"
#include "broker/metrics.h"
#include "common/json_depth.h"
#include "common/time_util.h"
#include "common/utf8.h"
#include "proto/wire.h"
#include "statemachine/device_ids.h"
#include "statemachine/event_types.h"
#include "statemachine/task_link.h"

namespace npuprof::broker {

using sm::json;

Result<std::unique_ptr<Broker>> Broker::Open(const BrokerOptions& opts) {
  // Before anything is made or bound: an endpoint libzmq would take but the
  // server cannot serve as named (listen_endpoint.h) is refused.
  for (const auto& ep : opts.endpoints)
    if (Status s = CheckListenEndpoint(ep); !s.ok()) return s;
  if (Status s = PrepareDataDir(opts.data_dir); !s.ok()) return s;
  store::StoreOptions so;
  so.sync = opts.sync;
  so.min_free_bytes = opts.min_free_bytes;
  so.space_label = opts.data_dir;
  auto store = store::EventStore::Open(opts.data_dir + "/store", so);
  if (!store.ok()) return store.status();
  std::unique_ptr<Broker> b(new Broker(opts, std::move(store).value()));
  std::vector<std::string> eps = opts.endpoints;
  const std::string ipc = wire::IpcEndpointFor(opts.data_dir);
  if (std::find(eps.begin(), eps.end(), ipc) == eps.end()) eps.insert(eps.begin(), ipc);
  auto zap = SecureListener(b->ctx_, b->router_, opts.data_dir, eps, opts.security);
  if (!zap.ok()) return zap.status();
  b->zap_ = std::move(zap).value();
  std::error_code ec;
  std::filesystem::remove(opts.data_dir + "/npuprof.sock", ec);
  for (const auto& ep : eps) {
    try {
      b->router_.bind(ep);
    } catch (const zmq::error_t& e) {
      return Status::Unavailable(fmt::format("cannot listen on {}: {}", ep, e.what()));
    }
    b->endpoints_.push_back(ep);
  }
  return b;
}

Broker::Broker(BrokerOptions opts, std::unique_ptr<store::EventStore> store)
    : opts_(std::move(opts)), store_(std::move(store)), kinds_(opts_.kinds ? *opts_.kinds : sm::DefaultKinds()), ctx_(1),
      router_(ctx_, zmq::socket_type::router) {
  // The verify runner's wake-up: inproc, bound here so the runner's thread
  // can connect at once.
  verify_wake_ = zmq::socket_t(ctx_, zmq::socket_type::pull);
  verify_wake_.set(zmq::sockopt::linger, 0);
  const std::string wake = fmt::format("inproc://npuprof-verify-{}", static_cast<const void*>(this));
  verify_wake_.bind(wake);
  verifier_ = std::make_unique<VerifyRunner>(ctx_, wake, *store_, kinds_);
  router_.set(zmq::sockopt::router_mandatory, 0);
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::sndhwm, 100000);
  router_.set(zmq::sockopt::rcvhwm, 100000);
}

Broker::~Broker() = default;

Status Broker::Run(const std::atomic<bool>& stop) {
  Recover();
  while (!stop.load()) {
    const int64_t now = NowMs();
    const int64_t wait = timers_.MsUntilNext(now, std::min<int64_t>(opts_.heartbeat_ms, 200));
    zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {verify_wake_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(wait));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Internal(std::string("poll: ") + e.what());
    }
    // Drain what has arrived, bounded so timers and commits keep their pace.
    for (int i = 0; i < 2000; ++i) {
      auto frames = wire::RecvFrames(router_, /*dontwait=*/true);
      if (!frames) break;
      HandleMessage(*frames);
    }
    const int64_t after = NowMs();
    FireTimers(after);
    CheckWorkers(after);
    ResumeUnrecordedRuns(after);
    Commit();
    if (ScheduleLeases()) Commit();  // grants follow the releases they depend on
    Dispatch();
    LaunchVerifies();
    if (items[1].revents & ZMQ_POLLIN) ReplyToVerifies();
    SendHeartbeats(after);
    if (opts_.metrics)
      opts_.metrics->TurnEnded(leases_, dispatcher_.workers(), dispatcher_.in_flight(), dispatcher_.pending());
  }
  return Status::Ok();
}

void Broker::Recover() {
  if (auto evs = store_->ReadRun(sm::kMachinesStream); evs.ok())
    for (const auto& e : *evs) {
      machines_.ApplyStored(e);
      ApplyQuarantineEvent(e);
    }
  store::RunFilter f;
  f.terminal = false;
  const auto rows = store_->ListRuns(f);
  const int64_t now = NowMs();
  // Leases first: holders before waiters, so candidates see what npuprof holds.
  for (const auto& row : rows)
    if (sm::RunState* s = LoadRun(row.run_id()); s && !s->terminal && s->lease.phase == sm::LeasePhase::kHeld) leases_.Sync(*s);
  for (const auto& row : rows)
    if (sm::RunState* s = LoadRun(row.run_id()); s && !s->terminal && s->lease.phase == sm::LeasePhase::kWaiting) leases_.Sync(*s);
  // A sweep's children before any watch: a child whose submission the crash
  // lost must exist again before its parent watches it.
  for (const auto& row : rows) RecoverChildren(row.run_id());
  for (const auto& row : rows) {
    sm::RunState* s = LoadRun(row.run_id());
    if (!s || s->terminal) continue;
    for (const auto& [id, t] : s->timers)
      if (t.armed) timers_.Push({t.deadline_ms, row.run_id(), id});
    for (const auto& target : std::vector<std::string>(s->watching)) AddWatch(row.run_id(), target);
    sm::Input in;
    in.type = sm::Input::Type::kRecover;
    in.now_ms = now;
    (void)DecideAndStage(row.run_id(), in);
  }
  if (!rows.empty()) spdlog::info("recovery: {} unfinished run(s) resumed", rows.size());
  Commit();
  if (ScheduleLeases()) Commit();
}

// Every message is handled inside its own error boundary: a malformed one is
// dropped or refused (and logged with the peer); nothing from outside ends
// the process.
void Broker::HandleMessage(std::vector<std::string>& frames) {
  if (frames.size() != 3) {
    spdlog::warn("dropping a message of {} frame(s) from peer {} (expected 3)", frames.size(),
                 frames.empty() ? std::string("?") : PeerName(frames[0]));
    return;
  }
  const std::string& identity = frames[0];
  const std::string& header = frames[1];
  try {
    if (header == wire::kWorkerHeader) {
      HandleWorker(identity, frames[2]);
    } else if (header == wire::kClientHeader) {
      HandleClient(identity, frames[2]);
    } else {
      spdlog::warn("dropping message with unknown header ({} bytes) from peer {}", header.size(), PeerName(identity));
    }
  } catch (const std::exception& e) {
    spdlog::error("dropping a message from peer {} that could not be handled: {}", PeerName(identity), e.what());
  }
}

void Broker::HandleWorker(const std::string& identity, const std::string& body) {
  proto::WorkerToBroker msg;
  if (!msg.ParseFromString(body)) {
    spdlog::warn("dropping unparseable worker message");
    return;
  }
  const int64_t now = NowMs();
  const int64_t expiry = now + static_cast<int64_t>(opts_.heartbeat_ms) * opts_.heartbeat_liveness;

  if (msg.has_ready()) {
    // A worker that announces itself again has forgotten what it held.
    DecideLost(dispatcher_.WorkerReady(identity, msg.ready(), expiry), now);
    spdlog::info("worker {} (pid {}) ready: {} slot(s)", ToValidUtf8(msg.ready().worker_id()), msg.ready().pid(),
                 std::max(1, msg.ready().capacity()));
    return;
  }
  WorkerEntry* w = dispatcher_.Alive(identity, expiry);
  if (!w) {
    proto::BrokerToWorker bye;
    bye.set_disconnect(true);
    SendToWorker(identity, bye);
    return;
  }
  if (msg.has_progress()) {
    dispatcher_.Progress(msg.progress().task_id(), msg.progress().attempt(), now);
  } else if (msg.has_result()) {
    const proto::TaskResult& r = msg.result();
    const Dispatcher::Answer answer = dispatcher_.Result(identity, r.run_id(), r.task_id(), r.attempt());
    if (!answer.decide) {
      spdlog::warn("dropping a result for task {} from worker {}: it does not hold that task",
                   ToValidUtf8(TruncateUtf8(r.task_id(), 80)), ToValidUtf8(w->worker_id));
      return;
    }
    if (opts_.metrics && answer.timing) opts_.metrics->TaskAnswered(answer.timing->first, answer.timing->second);
    sm::Input in;
    in.type = sm::Input::Type::kTaskResult;
    in.now_ms = now;
    in.task_id = r.task_id();
    in.attempt = r.attempt();
    in.ok = r.ok();
    in.retryable = r.retryable();
    in.error = ToValidUtf8(r.error());
    in.error_kind = ToValidUtf8(r.error_kind());
    // Read with the nesting limit: a result too deep to walk is a final failure naming the limit.
    if (!r.result_json().empty()) {
      Result<json> result = ParseJson(r.result_json());
      if (result.ok()) {
        in.result = std::move(result).value();
      } else if (in.ok) {
        in.ok = false;
        in.retryable = false;
        in.error_kind = "bad_result";
        in.error = fmt::format("worker {} answered a result that cannot be read: {}", ToValidUtf8(w->worker_id),
                               result.status().message());
      }
    }
    in.worker = w->worker_id;
    // The attempt's link figures as the event records them (task_link.h); an older worker sends none.
    if (r.has_link()) in.link = sm::TaskLinkJson(r.link());
    StoreEvidence(r, in);
    (void)DecideAndStage(r.run_id(), in);
    // A host key accepted under accept-new is recorded in the inventory
    // (the inventory says when: machine_inventory.h).
    if (auto accepted = machines_.HostKeyAcceptance(in.result, r.run_id()))
      StageMachineEvent(sm::kMachineHostKeyAccepted, *accepted);
  } else if (msg.has_disconnect()) {
    w->expires_ms = 0;  // handled as expired below
  }
}

void Broker::StoreEvidence(const proto::TaskResult& r, sm::Input& in) {
  // Evidence is stored unsynced: the events that reference it are committed
  // at the end of this turn in a synced batch, which syncs the write-ahead
  // log and with it these blobs (one fsync per turn, not one per blob).
  json blobs = json::object();
  for (const auto& b : r.blobs()) {
    auto h = store_->PutBlobWithNextSync(b.data());
    if (h.ok()) {
      blobs[ToValidUtf8(b.name())] = *h;
      continue;
    }
    // A result without its evidence would be a run citing nothing: the
    // attempt fails instead (retryable: space may come back), and the run
    // says why if it fails for good.
    const std::string name = ToValidUtf8(TruncateUtf8(b.name(), 120));
    spdlog::error("run {}: cannot store the evidence {} of task {} attempt {}: {}", r.run_id(), name,
                  ToValidUtf8(TruncateUtf8(r.task_id(), 80)), r.attempt(), h.status().ToString());
    in.ok = false;
    in.retryable = true;
    in.error_kind = h.status().code() == Code::kNoSpace ? "no_space" : "store_failed";
    in.error = fmt::format("npuprof could not store this task's evidence {} ({} MB): {}", name,
                           b.data().size() >> 20, h.status().message());
    in.result = nullptr;
    in.blobs = json::object();
    return;
  }
  in.blobs = blobs;
}

void Broker::DecideLost(const std::vector<LostTask>& lost, int64_t now) {
  for (const auto& l : lost) {
    sm::Input in;
    in.type = sm::Input::Type::kWorkerLost;
    in.now_ms = now;
    in.task_id = l.task_id;
    in.attempt = l.attempt;
    in.worker = l.worker;
    (void)DecideAndStage(l.run_id, in);
  }
}

void Broker::Send(const std::vector<ToWorker>& messages) {
  for (const auto& m : messages) SendToWorker(m.identity, m.msg);
}

void Broker::CheckWorkers(int64_t now) {
  for (const auto& identity : dispatcher_.workers().Expired(now)) {
    const WorkerEntry& w = dispatcher_.workers().all().at(identity);
    spdlog::warn("worker {} (pid {}) lost; {} task(s) to re-dispatch", w.worker_id, w.pid, w.tasks.size());
  }
  // Leases too: a task without progress for its lease is treated as lost.
  std::vector<ToWorker> cancels;
  const std::vector<LostTask> lost = dispatcher_.Expire(now, &cancels);
  Send(cancels);
  for (const auto& l : lost)
    if (l.lease_expired) spdlog::warn("task {} attempt {}: lease expired", l.task_id, l.attempt);
  DecideLost(lost, now);
}

void Broker::FireTimers(int64_t now) {
  for (const auto& t : timers_.PopDue(now)) {
    sm::Input in;
    in.type = sm::Input::Type::kTimerFired;
    in.now_ms = now;
    in.timer_id = t.timer_id;
    (void)DecideAndStage(t.run_id, in);
  }
}

void Broker::ResyncLease(const std::string& run_id) {
  if (sm::RunState* s = LoadRun(run_id)) leases_.Sync(*s);
  else leases_.Drop(run_id);
}

bool Broker::ScheduleLeases() {
  std::vector<DeviceScheduler::Grant> grants;
  std::vector<DeviceScheduler::Refusal> refusals;
  std::vector<DeviceScheduler::Check> checks;
  leases_.Schedule(&grants, &refusals, &checks);
  const int64_t now = NowMs();
  // A check not yet due (or already on its way) stages nothing: no commit for it.
  bool staged = AskForQuarantineChecks(checks, now);
  for (const auto& g : grants) {
    sm::Input in;
    in.type = sm::Input::Type::kLeaseGranted;
    in.now_ms = now;
    in.legs = g.legs;
    if (!DecideAndStage(g.run_id, in).ok()) {
      // Not grantable after all (e.g. the run ended meanwhile): resync its entry.
      ResyncLease(g.run_id);
    } else {
      staged = true;
      for (const sm::LeaseGrantLeg& leg : g.legs)
        spdlog::info("run {}: devices [{}] on {} leased", g.run_id, sm::DeviceIdsText(leg.devices), leg.machine);
    }
  }
  for (const auto& r : refusals) {
    sm::Input in;
    in.type = sm::Input::Type::kLeaseRefused;
    in.now_ms = now;
    in.error = r.error;
    // Schedule took the refused run off its queue, as it marks a grant held:
    // a refusal the run did not take leaves it waiting, so it goes back in.
    if (DecideAndStage(r.run_id, in).ok()) staged = true;
    else ResyncLease(r.run_id);
  }
  // A rejected input may have staged a cancel (a kind that threw: commit.cc).
  return staged || !turn_.staged.empty();
}

void Broker::Dispatch() {
  if (dispatcher_.pending() == 0) return;
  std::vector<ToWorker> sends;
  dispatcher_.Dispatch(
      NowMs(),
      [this](const std::string& run_id, const std::string& task_id) -> const sm::TaskInfo* {
        sm::RunState* s = LoadRun(run_id);
        const sm::TaskInfo* t = s && !s->terminal ? s->FindTask(task_id) : nullptr;
        return t && t->in_flight() ? t : nullptr;
      },
      [this](const std::string& kind) {
        if (!opts_.faults.crash_before_dispatch_kind.empty() && opts_.faults.crash_before_dispatch_kind == kind) {
          spdlog::critical("fault injection: crashing before dispatching {}", kind);
          std::raise(SIGKILL);
        }
      },
      &sends);
  Send(sends);
}

void Broker::SendToWorker(const std::string& identity, const proto::BrokerToWorker& msg) {
  try {
    send_budget_.Send(router_, identity, wire::kWorkerHeader, msg.SerializeAsString(), "worker");
  } catch (const zmq::error_t& e) {
    spdlog::warn("send to worker failed: {}", e.what());
  }
}

void Broker::SendHeartbeats(int64_t now) {
  if (now < next_heartbeat_ms_) return;
  next_heartbeat_ms_ = now + opts_.heartbeat_ms;
  proto::BrokerToWorker hb;
  hb.set_heartbeat(true);
  for (const auto& [identity, w] : dispatcher_.workers().all()) SendToWorker(identity, hb);
}

}  // namespace npuprof::broker
