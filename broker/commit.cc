// Staging decisions and committing them: one synced group commit per loop
// turn, then the side effects (dispatch, timers, replies) of what committed.
#include <csignal>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "broker/metrics.h"
#include "broker/projection_guard.h"
#include "common/time_util.h"
#include "common/utf8.h"
#include "statemachine/event_types.h"

namespace npuprof::broker {

using sm::json;
namespace ev = sm::ev;

namespace {

// Events whose commit the broker acts on (dispatch, cancel, timers, watches),
// besides the device lease bookkeeping.
bool HasFollowUp(const std::string& t) {
  return t == ev::kTaskScheduled || t == ev::kTaskRedispatched || t == ev::kTaskAbandoned ||
         t == ev::kTimerScheduled || t == ev::kTaskRetryScheduled || t == ev::kRunFinished ||
         t == ev::kWatchRequested || t == ev::kChildRunRequested || t == ev::kChildCancelRequested;
}

// The payload fields AfterCommit reads, kept until the commit instead of the
// whole payload (null for an event without follow-up).
json FollowUpFields(const std::string& type, const json& p) {
  if (!HasFollowUp(type)) return nullptr;
  json out = json::object();
  for (const char* k : {"task_id", "timer_id", "deadline_ms", "run_id"})
    if (auto it = p.find(k); it != p.end()) out[k] = *it;
  return out;
}

}  // namespace

sm::RunState* Broker::LoadRun(const std::string& run_id) {
  auto it = runs_.find(run_id);
  if (it != runs_.end()) return &it->second;
  auto events = store_->ReadRun(run_id);
  if (!events.ok() || events->empty()) return nullptr;
  // A stored event the fold cannot read is corruption: the run is not served
  // (`npuprof verify RUN` names the event), and nothing else stops.
  Result<sm::RunState> folded = sm::Fold(kinds_, *events);
  if (!folded.ok()) {
    spdlog::error("run {}: its stored events cannot be folded ({}); `npuprof verify {}` names the event", run_id,
                  folded.status().ToString(), run_id);
    return nullptr;
  }
  auto [pos, _] = runs_.emplace(run_id, std::move(*folded));
  return &pos->second;
}

void Broker::RebuildCachedRun(const std::string& run_id) {
  auto cached = runs_.find(run_id);
  if (cached == runs_.end()) return;
  auto committed = store_->ReadRun(run_id);
  auto staged = turn_.staged.find(run_id);
  const bool has_staged = staged != turn_.staged.end() && !staged->second.empty();
  if (!committed.ok() || (committed->empty() && !has_staged)) {
    // Nothing to rebuild from (a new run's rejected submission), or the
    // store cannot be read: forget the run; LoadRun reloads it on demand.
    if (!committed.ok()) spdlog::error("run {}: cannot reload after a rejected input: {}", run_id,
                                       committed.status().ToString());
    runs_.erase(cached);
    return;
  }
  Result<sm::RunState> folded = committed->empty() ? Result<sm::RunState>(sm::RunState{}) : sm::Fold(kinds_, *committed);
  if (!folded.ok()) {
    spdlog::error("run {}: cannot reload after a rejected input ({}); `npuprof verify {}` names the event", run_id,
                  folded.status().ToString(), run_id);
    runs_.erase(cached);
    return;
  }
  sm::RunState rebuilt = std::move(*folded);
  rebuilt.run_id = run_id;
  if (has_staged)  // decided earlier in this turn, not committed yet
    for (const proto::Event& e : staged->second) sm::ApplyStaged(kinds_, rebuilt, e);
  // In place: a caller holding a pointer to the cached run (AfterCommit)
  // keeps a valid one.
  cached->second = std::move(rebuilt);
}

// The kind threw on `failed` (DecideAndStage). A successful task result it
// could not take fails that task for good first (error_kind kind_failed): the
// task leaves the in-flight set and the kind's own failure path runs, which
// is its cleanup (stop the service, release the devices); a cancel that
// waited for that task would wait forever. Any other input, or a failure path
// that throws too, cancels the run, with the failure named in
// CancelRequested.by. If the cancel throws as well, the run is left as it is
// and the log says so.
void Broker::CancelAfterKindFailure(const std::string& run_id, const sm::Input& failed, const std::string& what) {
  const sm::RunState* s = LoadRun(run_id);
  if (s == nullptr || s->terminal) return;
  const std::string why = fmt::format("the {} kind failed on {}: {}", s->kind, sm::InputCause(failed),
                                      TruncateUtf8(what, 300));
  spdlog::error("run {}: {}", run_id, why);
  if (failed.type == sm::Input::Type::kTaskResult && failed.ok) {
    sm::Input f = failed;
    f.ok = false;
    f.retryable = false;
    f.error_kind = "kind_failed";
    f.error = "npuprof: " + why;
    f.result = nullptr;
    if (DecideAndStage(run_id, f).ok()) return;  // if this throws, the nested call cancels
    s = LoadRun(run_id);
    if (s == nullptr || s->terminal) return;
  }
  if (s->cancel_requested) return;
  sm::Input cancel;
  cancel.type = sm::Input::Type::kCancel;
  cancel.now_ms = failed.now_ms;
  cancel.by = "npuprof: " + why;
  if (Status st = DecideAndStage(run_id, cancel); !st.ok())
    spdlog::error("run {}: left as it is, the cancel failed too: {}", run_id, st.ToString());
}

Status Broker::DecideAndStage(const std::string& run_id, const sm::Input& input) {
  sm::RunState* s = LoadRun(run_id);
  sm::RunState fresh;
  fresh.run_id = run_id;
  const bool was_terminal = s && s->terminal;
  const uint64_t committed_or_staged_seq = s ? s->last_seq : 0;
  // Decides on the cached state itself (no copy of a run's whole state per
  // input); a rejected input leaves it unusable, so it is rebuilt.
  // A kind that throws on an input it did not expect rejects that input; it
  // never ends the broker. The run would then wait for an input that never
  // comes, holding its devices and its service: it is cancelled instead,
  // through the kind's own cleanup, with the failure named in CancelRequested.
  Result<sm::Decided> decided = Status::Internal("not decided");
  bool threw = false;
  std::string what;
  try {
    decided = sm::DecideWithState(kinds_, s ? std::move(*s) : std::move(fresh), input);
  } catch (const std::exception& e) {
    threw = true;
    what = e.what();
    decided = Status::Internal("the run's kind failed on this input: " + TruncateUtf8(what, 300));
  }
  if (!decided.ok()) {
    spdlog::warn("run {}: input rejected: {}", run_id, decided.status().ToString());
    if (s) RebuildCachedRun(run_id);
    if (threw && s && input.type != sm::Input::Type::kCancel && input.type != sm::Input::Type::kSubmit)
      CancelAfterKindFailure(run_id, input, what);
    return decided.status();
  }
  if (decided->events.empty()) {
    if (was_terminal && input.type == sm::Input::Type::kTaskResult)
      spdlog::info("run {}: late result of {} attempt {} dropped (the run has finished)", run_id, input.task_id,
                   input.attempt);
    if (s) *s = std::move(decided->state);  // unchanged: no event was applied
    return Status::Ok();
  }
  if (!s) s = &runs_.emplace(run_id, sm::RunState{}).first->second;
  turn_.expected_seq.try_emplace(run_id, committed_or_staged_seq);
  // The decision applied its events to the state it was given.
  *s = std::move(decided->state);
  auto& staged = turn_.staged[run_id];
  auto& follow_ups = turn_.follow_ups[run_id];
  std::vector<json> quarantines;
  for (auto& ne : decided->events) {
    if (ne.type == sm::kDevicesReleased) {
      // A multi-node release judges each node on its own (its legs).
      if (ne.payload.contains("legs") && ne.payload["legs"].is_array()) {
        for (const json& leg : ne.payload["legs"])
          if (leg.is_object() && leg.contains("quarantine")) quarantines.push_back(leg);
      } else if (ne.payload.contains("quarantine")) {
        quarantines.push_back(ne.payload);
      }
    }
    follow_ups.push_back(FollowUpFields(ne.type, ne.payload));
    proto::Event e;
    e.set_run_id(run_id);
    e.set_type(std::move(ne.type));
    e.set_time_ms(input.now_ms);
    e.set_payload_json(ne.payload.dump(-1, ' ', false, json::error_handler_t::replace));
    e.set_cause(std::move(ne.cause));
    staged.push_back(std::move(e));
  }
  // In the same group commit as the release: the devices are never free in
  // between, and the quarantine outlives the run (recovery reads the stream).
  for (const json& q : quarantines)
    StageMachineEvent(sm::kDevicesQuarantined,
                      json{{"machine", q.value("machine", "")}, {"devices", q.value("devices", json::array())},
                           {"run_id", run_id}, {"why", q.value("quarantine", "")}},
                      "run " + run_id);
  return Status::Ok();
}

void Broker::StageMachineEvent(const std::string& type, const json& payload, const std::string& cause) {
  const std::string run_id = sm::kMachinesStream;
  auto& staged = turn_.staged[run_id];
  turn_.expected_seq.try_emplace(run_id, machines_.last_seq());
  proto::Event e;
  e.set_run_id(run_id);
  e.set_type(type);
  e.set_time_ms(NowMs());
  e.set_payload_json(payload.dump(-1, ' ', false, json::error_handler_t::replace));
  e.set_cause(cause);
  staged.push_back(std::move(e));
}

proto::RunIndexRow Broker::IndexRowOf(const sm::RunState& s) const {
  proto::RunIndexRow row;
  row.set_run_id(s.run_id);
  row.set_kind(s.kind);
  row.set_state(s.state);
  row.set_status(std::string(sm::RunStatusName(s.status)));
  row.set_created_ms(s.created_ms);
  row.set_updated_ms(s.updated_ms);
  row.set_machine(s.machine);
  row.set_tag(s.tag);
  row.set_last_seq(s.last_seq);
  row.set_terminal(s.terminal);
  return row;
}

void Broker::Commit() {
  Turn turn = std::move(turn_);
  turn_ = Turn{};
  std::vector<store::AppendRequest> reqs;
  reqs.reserve(turn.staged.size());  // one allocation, not one per doubling
  for (auto& [run_id, events] : turn.staged) {
    store::AppendRequest req;
    req.run_id = run_id;
    req.expected_last_seq = turn.expected_seq[run_id];
    req.events = std::move(events);
    if (run_id != sm::kMachinesStream) {
      if (auto it = runs_.find(run_id); it != runs_.end()) req.index = IndexRowOf(it->second);
    }
    reqs.push_back(std::move(req));
  }
  std::map<std::string, Status> failed;
  if (!reqs.empty()) {
    std::vector<std::vector<proto::Event>> stored;
    // The staged events are ours: the store moves them into stored.
    const auto commit_started = std::chrono::steady_clock::now();
    std::vector<Status> statuses = store_->AppendGroup(std::move(reqs), &stored);
    if (opts_.metrics) opts_.metrics->CommitTimed(std::chrono::steady_clock::now() - commit_started);
    // reqs[i] was built from the i-th run of turn.staged (whose keys are
    // intact): walk it again instead of keeping a copy of every run id.
    auto staged = turn.staged.cbegin();
    for (size_t i = 0; i < statuses.size(); ++i, ++staged) {
      const std::string& run_id = staged->first;
      if (statuses[i].ok() && turn.imported.count(run_id)) {
        // An imported run: its events only had to be stored, with the hashes
        // they were exported with (verified before staging).
        const auto& want = turn.imported[run_id];
        for (size_t k = 0; k < stored[i].size() && k < want.size(); ++k)
          if (stored[i][k].hash() != want[k]) {
            spdlog::critical("run {}: imported event {} hashes differently here (store bug)", run_id, k + 1);
            failed[run_id] = Status::Internal("imported events hash differently here (store bug)");
            break;
          }
        runs_.erase(run_id);  // reloaded from the store on demand
      } else if (statuses[i].ok()) {
        AfterCommit(run_id, stored[i], turn.follow_ups[run_id]);
      } else {
        spdlog::error("append to {} failed: {}", run_id, statuses[i].ToString());
        failed[run_id] = statuses[i];
        runs_.erase(run_id);  // drop the speculative state; reload from the store
        if (sm::RunState* s = LoadRun(run_id)) leases_.Sync(*s);
        else leases_.Drop(run_id);
        // The store could not write (a full disk, an I/O error): the inputs
        // this turn decided for the run are lost with its events; it resumes
        // when writes do.
        const Code code = statuses[i].code();
        if ((code == Code::kNoSpace || code == Code::kIoError) && !turn.imported.count(run_id) &&
            run_id != sm::kMachinesStream && unrecorded_.insert(run_id).second)
          spdlog::warn("run {}: its progress could not be recorded ({}); it resumes from its recorded events once "
                       "the store takes writes again",
                       run_id, statuses[i].message());
      }
    }
    if (opts_.faults.crash_after_global_pos > 0 &&
        store_->LastGlobalPos() >= opts_.faults.crash_after_global_pos) {
      spdlog::critical("fault injection: crashing after global position {}", store_->LastGlobalPos());
      std::raise(SIGKILL);
    }
  }
  for (auto& [run_id, reply] : turn.replies) {
    if (auto it = failed.find(run_id); it != failed.end()) {
      reply.response.set_ok(false);
      reply.response.set_exit_code(2);
      reply.response.set_error(reply.read ? "the run's latest changes could not be recorded, so what they showed "
                                            "is not given: " + it->second.ToString() + "; ask again"
                                          : "could not record the change: " + it->second.ToString());
      reply.response.clear_body_json();
    }
    ReplyNow(reply.identity, reply.response);
  }
}

void Broker::ResumeUnrecordedRuns(int64_t now) {
  if (unrecorded_.empty() || now < next_resume_try_ms_) return;
  next_resume_try_ms_ = now + 1000;  // a full disk is not measured on every turn
  if (Status room = store_->CheckSpace(store::SpaceUse::kProgress); !room.ok()) return;
  std::set<std::string> runs = std::move(unrecorded_);
  unrecorded_.clear();
  for (const std::string& run_id : runs) {
    sm::RunState* s = LoadRun(run_id);
    if (!s || s->terminal) continue;
    // Timers the lost turn fired are still armed in the recorded state:
    // armed again (one that fires twice is ignored by the engine).
    for (const auto& [id, t] : s->timers)
      if (t.armed) timers_.Push({t.deadline_ms, run_id, id});
    sm::Input in;
    in.type = sm::Input::Type::kRecover;
    in.now_ms = now;
    if (DecideAndStage(run_id, in).ok()) spdlog::info("run {}: resumed after its progress could not be recorded", run_id);
  }
  // A sweep child whose submission was lost is submitted again (idempotent).
  std::vector<std::string> live;
  for (const auto& [id, s] : runs_)
    if (!s.terminal) live.push_back(id);
  for (const auto& id : live) RecoverChildren(id);
}

void Broker::AfterCommit(const std::string& run_id, const std::vector<proto::Event>& stored,
                         const std::vector<json>& follow_ups) {
  if (run_id == sm::kMachinesStream) {
    for (const auto& e : stored) {
      machines_.ApplyStored(e);
      ApplyQuarantineEvent(e);
    }
    return;
  }
  sm::RunState* s = LoadRun(run_id);
  if (!s) return;
  if (follow_ups.size() != stored.size()) {  // cannot happen: DecideAndStage stages both
    spdlog::critical("run {}: {} follow-ups for {} stored events", run_id, follow_ups.size(), stored.size());
    std::abort();
  }
  if (!stored.empty()) s->last_hash = stored.back().hash();
  for (size_t i = 0; i < stored.size(); ++i) {
    const proto::Event& e = stored[i];
    const std::string& t = e.type();
    if (opts_.metrics) opts_.metrics->EventCommitted(e, *s);
    if (t == sm::kDevicesRequested) leases_.Wait(run_id, s->lease, e.global_pos());
    else if (t == sm::kDevicesLeased) leases_.Hold(run_id, s->lease);
    else if (t == sm::kDevicesReleased || t == sm::kDevicesUnavailable || t == ev::kRunFinished) leases_.Drop(run_id);
    AfterLeaseEvent(run_id, e, *s);
    if (!HasFollowUp(t)) continue;
    // The fields kept when DecideAndStage staged the event: one per staged
    // event of the run, in the order the store appended them.
    const json& p = follow_ups[i];
    if (t == ev::kTaskScheduled || t == ev::kTaskRedispatched) {
      const std::string task_id = p.value("task_id", "");
      const sm::TaskInfo* task = s->FindTask(task_id);
      // A task the same decision already failed (its payload was refused) is never sent.
      if (task && !task->in_flight()) continue;
      std::vector<ToWorker> cancels;
      dispatcher_.Schedule(run_id, task_id, task ? task->kind : std::string(), &cancels);
      Send(cancels);
    } else if (t == ev::kTaskAbandoned) {
      std::vector<ToWorker> cancels;
      dispatcher_.Abandon(p.value("task_id", ""), &cancels);
      Send(cancels);
    } else if (t == ev::kTimerScheduled || t == ev::kTaskRetryScheduled) {
      timers_.Push({p.value("deadline_ms", int64_t{0}), run_id, p.value("timer_id", "")});
    } else if (t == ev::kWatchRequested) {
      // May decide on this run at once (the target already ended); a
      // rejected decision rebuilds its cached state in place, but a store
      // read error drops it: look it up again.
      AddWatch(run_id, p.value("run_id", ""));
      s = LoadRun(run_id);
      if (!s) return;
    } else if (t == ev::kChildRunRequested || t == ev::kChildCancelRequested) {
      // Stages the child's submission (or cancel): committed next turn, and
      // redone at recovery if the server dies before that.
      if (t == ev::kChildRunRequested) SubmitChild(run_id, p.value("run_id", ""));
      else CancelChild(run_id, p.value("run_id", ""));
      s = LoadRun(run_id);
      if (!s) return;
    } else if (t == ev::kRunFinished) {
      auto w = watchers_.find(run_id);
      if (w != watchers_.end()) {
        std::set<std::string> waiting = std::move(w->second);
        watchers_.erase(w);
        for (const auto& watcher : waiting) DeliverWatch(watcher, run_id);
      }
    }
  }
  // Keep the cache bounded: finished runs are reloaded from the store on demand.
  if (s->terminal && runs_.size() > 2000) runs_.erase(run_id);
}

void Broker::AddWatch(const std::string& watcher, const std::string& target) {
  sm::RunState* t = LoadRun(target);
  if (!t || t->terminal) {
    DeliverWatch(watcher, target);
    return;
  }
  watchers_[target].insert(watcher);
}

void Broker::DeliverWatch(const std::string& watcher, const std::string& target) {
  sm::RunState* t = LoadRun(target);
  json payload = {{"run_id", target}};
  if (!t) {
    payload["status"] = "missing";
    payload["state"] = "missing";
  } else {
    payload["status"] = sm::RunStatusName(t->status);
    payload["state"] = t->state;
    if (const sm::RunKind* k = kinds_.Find(t->kind))
      payload["summary"] = GuardedProjection("summary", target, [&] { return k->Summary(*t); });
  }
  sm::Input in;
  in.type = sm::Input::Type::kSignal;
  in.now_ms = NowMs();
  in.signal = ev::kSignalWatchedRunFinished;
  in.result = payload;
  (void)DecideAndStage(watcher, in);
}

}  // namespace npuprof::broker
