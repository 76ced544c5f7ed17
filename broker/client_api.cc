// The client verbs the broker answers. Queries read the store and the run
// cache; changes go through the engine and are answered after their commit.
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "broker/broker.h"
#include "broker/metrics.h"
#include "broker/projection_guard.h"
#include "broker/request_fields.h"
#include "common/json_depth.h"
#include "common/socket_security.h"
#include "common/time_util.h"
#include "common/utf8.h"
#include "proto/wire.h"
#include "statemachine/event_types.h"
#include "statemachine/import_checks.h"
#include "statemachine/sweep_machine.h"
#include "statemachine/child_runs.h"
#include "statemachine/replay_verifier.h"
#include "statemachine/spec_checks.h"

namespace npuprof::broker {

using sm::json;

namespace {

proto::ClientResponse Ok(const json& body) {
  proto::ClientResponse r;
  r.set_ok(true);
  r.set_exit_code(0);
  // Text from outside (a run's spec, a target's output) may hold invalid UTF-8: replaced, never thrown.
  r.set_body_json(body.dump(-1, ' ', false, json::error_handler_t::replace));
  return r;
}

proto::ClientResponse Err(int exit_code, const std::string& error) {
  proto::ClientResponse r;
  r.set_ok(false);
  r.set_exit_code(exit_code);
  r.set_error(ToValidUtf8(error));
  return r;
}

// The verbs that answer with a run's state: a reply to one of them waits
// for the commit of what it shows (Answer) and says so if that fails.
bool ShowsState(const std::string& verb) { return verb == "show" || verb == "manifest"; }

json EventToJson(const proto::Event& e) {
  // A stored payload that cannot be read (verify names it) is shown as its text.
  Result<json> parsed = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
  json payload = parsed.ok() ? std::move(parsed).value() : json(e.payload_json());
  return {{"seq", e.seq()},          {"global_pos", e.global_pos()}, {"type", e.type()},
          {"time", IsoTimeMs(e.time_ms())}, {"time_ms", e.time_ms()}, {"payload", payload},
          {"cause", e.cause()},      {"prev_hash", e.prev_hash()},   {"hash", e.hash()}};
}

}  // namespace

void Broker::ReplyNow(const std::string& identity, const proto::ClientResponse& r) {
  std::string body = r.SerializeAsString();
  // The client's socket would drop a larger frame (and its connection): say so instead.
  if (static_cast<int64_t>(body.size()) > MaxMessageBytes())
    body = Err(2, fmt::format("the answer is {} bytes, over the {} message cap of npuprof's sockets", body.size(),
                              MessageCapText()))
               .SerializeAsString();
  try {
    send_budget_.Send(router_, identity, wire::kClientHeader, std::move(body), "client");
  } catch (const zmq::error_t& e) {
    spdlog::warn("reply to client failed: {}", e.what());
  }
}

void Broker::HandleClient(const std::string& identity, const std::string& body) {
  proto::ClientRequest req;
  if (!req.ParseFromString(body)) {
    if (opts_.metrics) opts_.metrics->ClientMalformed();
    ReplyNow(identity, Err(2, "malformed request: not a ClientRequest message (its verb and arguments must be "
                              "UTF-8 text)"));
    return;
  }
  // Read with the nesting limit (common/json_depth.h) before anything walks it.
  Result<json> parsed = req.args_json().empty() ? Result<json>(json::object()) : ParseJson(req.args_json());
  if (!parsed.ok() || !parsed->is_object()) {
    if (opts_.metrics) opts_.metrics->ClientAnswered(req.verb(), false);
    ReplyNow(identity, Err(2, parsed.ok() ? "request arguments are not a JSON object"
                                          : "request arguments refused: " + parsed.status().message()));
    return;
  }
  const json args = std::move(parsed).value();
  const std::string& verb = req.verb();
  if (Status st = CheckRequestFields(verb, args); !st.ok()) {
    if (opts_.metrics) opts_.metrics->ClientAnswered(verb, false);
    ReplyNow(identity, Err(2, st.message()));
    return;
  }
  std::string deferred;
  proto::ClientResponse r;
  // Each request inside its own error boundary: nothing a client sends ends
  // the process. A verb that throws has staged nothing it did not also
  // validate (decisions have their own boundary in DecideAndStage).
  try {
    r = Answer(verb, args, &deferred);
  } catch (const std::exception& e) {
    spdlog::error("client request '{}' failed: {}", ToValidUtf8(TruncateUtf8(verb, 64)), e.what());
    r = Err(2, fmt::format("the server could not answer '{}': {} (the request is malformed; nothing was done)",
                           ToValidUtf8(TruncateUtf8(verb, 64)), e.what()));
    deferred.clear();
  }
  if (opts_.metrics) opts_.metrics->ClientAnswered(verb, r.ok());
  if (deferred == kVerifyLater) verify_queued_.back().identity = identity;  // answered by the runner
  else if (deferred.empty()) ReplyNow(identity, r);
  else turn_.replies.push_back({deferred, Reply{identity, r, ShowsState(verb)}});
}

proto::ClientResponse Broker::Answer(const std::string& verb, const json& args, std::string* deferred_run) {
  std::string& deferred = *deferred_run;
  proto::ClientResponse r;
  if (verb == "ping") {
    r = Ok({{"server", "npuprof"}, {"pid", ::getpid()}, {"data_dir", opts_.data_dir}, {"endpoints", endpoints_}});
  } else if (Status room = (verb == "submit" || verb == "import") ? store_->CheckSpace(store::SpaceUse::kNewWork)
                                                                   : Status::Ok();
             !room.ok()) {
    // New work waits for space; runs under way go on (store/disk_space.h).
    r = Err(2, room.message() + ": no new work is taken until space is freed there (runs under way go on)");
  } else if (verb == "submit") {
    r = Submit(args, &deferred);
  } else if (ShowsState(verb)) {
    r = Show(args, verb == "manifest");
    // A run whose events this turn has staged is shown as they make it, so
    // the answer waits for their commit: a client never reads a state that a
    // crash before the commit would take back (and `events` then lists them).
    if (const std::string run_id = args.value("run_id", ""); r.ok() && turn_.staged.count(run_id))
      deferred = run_id;
  } else if (verb == "events") {
    r = Events(args);
  } else if (verb == "runs") {
    r = Runs(args);
  } else if (verb == "cancel") {
    r = Cancel(args, &deferred);
  } else if (verb.rfind("machine.", 0) == 0) {
    r = MachineVerb(verb, args, &deferred);
  } else if (verb == "workers") {
    r = Workers();
  } else if (verb == "verify") {
    r = Verify(args, &deferred);
  } else if (verb == "import") {
    r = Import(args, &deferred);
  } else if (verb == "signal") {
    r = Signal(args, &deferred);
  } else if (verb == "blob") {
    r = Blob(args);
  } else {
    r = Err(2, fmt::format("unknown verb '{}'", ToValidUtf8(TruncateUtf8(verb, 64))));
  }
  return r;
}

proto::ClientResponse Broker::Submit(const json& args, std::string* deferred_run) {
  const std::string kind = args.value("kind", "");
  json spec = args.value("spec", json::object());
  std::string run_id = args.value("run_id", "");
  // Whether an id is in use: cached or staged, else a point lookup in the
  // store (an id is nearly always new: folding it with LoadRun would build a
  // store iterator just to find nothing).
  auto taken = [&](const std::string& id) -> Result<bool> {
    if (runs_.count(id) || turn_.staged.count(id)) return true;
    return store_->HasEvents(id);
  };
  if (!run_id.empty()) {
    if (!sm::IsSafeNameForId(run_id))
      return Err(2, "run_id may use only A-Z a-z 0-9 . _ - (1-64 characters)");
    Result<bool> t = taken(run_id);
    if (!t.ok()) return Err(2, t.status().ToString());
    if (sm::RunState* existing = *t ? LoadRun(run_id) : nullptr)
      return Ok({{"run_id", run_id},
                 {"existing", true},
                 {"state", existing->state},
                 {"status", sm::RunStatusName(existing->status)}});
  } else {
    for (run_id = NewRunId(NowMs());; run_id = NewRunId(NowMs())) {
      Result<bool> t = taken(run_id);
      if (!t.ok()) return Err(2, t.status().ToString());
      if (!*t) break;
    }
  }
  // Fields the server fills in are the server's: a client's are dropped, so a
  // run can never point at a machine record the inventory does not hold.
  for (const char* owned : {"machine_record", "attach_run_record", "baseline_run_record"}) spec.erase(owned);
  if (spec.contains("machine") && spec["machine"].is_string()) {
    if (auto rec = machines_.Find(spec["machine"].get<std::string>())) spec["machine_record"] = *rec;
  }
  // Each node of a multi-node deployment gets its own record the same way.
  if (spec.contains("nodes") && spec["nodes"].is_array())
    for (json& node : spec["nodes"]) {
      if (!node.is_object()) continue;
      node.erase("machine_record");
      if (node.contains("machine") && node["machine"].is_string())
        if (auto rec = machines_.Find(node["machine"].get<std::string>())) node["machine_record"] = *rec;
    }
  // A run that builds on another one (attach to a service, baseline from a
  // previous run) gets that run's summary as it is at submit time.
  for (const char* field : {"attach_run", "baseline_run"}) {
    if (!spec.contains(field) || !spec[field].is_string()) continue;
    const std::string other = spec[field].get<std::string>();
    sm::RunState* o = LoadRun(other);
    if (!o) return Err(2, fmt::format("{}: no run '{}'", field, other));
    const sm::RunKind* k = kinds_.Find(o->kind);
    json rec = json::object();
    try {
      if (k) rec = k->Summary(*o);
    } catch (const std::exception& e) {
      return Err(2, fmt::format("{}: run '{}' cannot be read ({}); name another run", field, other,
                                TruncateUtf8(e.what(), 300)));
    }
    rec["data"] = o->data;
    rec["spec"] = o->spec;
    spec[std::string(field) + "_record"] = rec;
    if (!spec.contains("machine") && !o->machine.empty()) {
      spec["machine"] = o->machine;
      if (auto m = machines_.Find(o->machine)) spec["machine_record"] = *m;
    }
  }
  sm::Input in;
  in.type = sm::Input::Type::kSubmit;
  in.now_ms = NowMs();
  in.kind = kind;
  in.spec = std::move(spec);
  // Known to be new (checked above): cache its empty state, so that deciding
  // does not look the run up in the store a second time.
  runs_.try_emplace(run_id).first->second.run_id = run_id;
  Status st = DecideAndStage(run_id, in);
  if (!st.ok()) {
    if (turn_.staged.count(run_id) == 0) runs_.erase(run_id);
    return Err(2, st.message());
  }
  *deferred_run = run_id;
  return Ok({{"run_id", run_id}});
}

proto::ClientResponse Broker::Show(const json& args, bool manifest) {
  const std::string run_id = args.value("run_id", "");
  sm::RunState* s = LoadRun(run_id);
  if (!s || run_id == sm::kMachinesStream) return Err(2, fmt::format("no run '{}'", run_id));
  const sm::RunKind* kind = kinds_.Find(s->kind);
  if (!kind) return Err(2, fmt::format("run '{}' has unknown kind '{}'", run_id, s->kind));
  if (manifest) return Ok(kind->Manifest(*s));
  json summary = kind->Summary(*s);
  if (sm::HasChildRuns(*s)) AddLiveChildStatus(summary);
  // Live, not part of the projection: what a queued run waits for.
  if (!s->terminal && summary.is_object())
    if (json w = leases_.WaitingFor(run_id); !w.is_null()) summary["waiting_for"] = w;
  return Ok(summary);
}

proto::ClientResponse Broker::Events(const json& args) {
  const std::string run_id = args.value("run_id", "");
  const uint64_t from_seq = args.value("from_seq", uint64_t{1});
  // A client tailing a run asks for what follows the last event it saw:
  // answered from the committed tip without opening a store iterator.
  const uint64_t last_seq = store_->LastSeq(run_id);
  if (last_seq == 0) return Err(2, fmt::format("no run '{}'", run_id));
  if (from_seq > last_seq) return Ok({{"run_id", run_id}, {"events", json::array()}});
  auto evs = store_->ReadRun(run_id, from_seq);
  if (!evs.ok()) return Err(2, evs.status().ToString());
  json out = json::array();
  for (const auto& e : *evs) out.push_back(EventToJson(e));
  return Ok({{"run_id", run_id}, {"events", out}});
}

proto::ClientResponse Broker::Runs(const json& args) {
  store::RunFilter f;
  f.state = args.value("state", "");
  f.kind = args.value("kind", "");
  f.machine = args.value("machine", "");
  f.tag = args.value("tag", "");
  if (args.contains("terminal") && args["terminal"].is_boolean()) f.terminal = args["terminal"].get<bool>();
  auto rows = store_->ListRuns(f);
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.created_ms() > b.created_ms(); });
  const std::string status = args.value("status", "");
  if (!status.empty() && !sm::ParseRunStatus(status))
    return Err(2, fmt::format("runs: unknown status '{}' (running, ok, failed or cancelled)",
                              ToValidUtf8(TruncateUtf8(status, 64))));
  json out = json::array();
  for (const auto& r : rows) {
    if (!status.empty() && r.status() != status) continue;
    out.push_back({{"run_id", r.run_id()},   {"kind", r.kind()},         {"state", r.state()},
                   {"status", r.status()},   {"machine", r.machine()},   {"tag", r.tag()},
                   {"created_at", IsoTimeMs(r.created_ms())}, {"updated_at", IsoTimeMs(r.updated_ms())},
                   {"terminal", r.terminal()}});
    if (!r.terminal())
      if (json w = leases_.WaitingFor(r.run_id()); !w.is_null()) out.back()["waiting_for"] = w;
  }
  json body = {{"runs", out}};
  if (json q = leases_.Quarantined(); !q.empty()) {
    for (auto& e : q) e["since"] = IsoTimeMs(e.value("since_ms", int64_t{0}));
    body["quarantined"] = q;
  }
  return Ok(body);
}

proto::ClientResponse Broker::InputToLiveRun(const std::string& run_id, const sm::Input& in, const json& ack,
                                             std::string* deferred_run) {
  sm::RunState* s = LoadRun(run_id);
  if (!s) return Err(2, fmt::format("no run '{}'", run_id));
  if (s->terminal)
    return Ok({{"run_id", run_id},
               {"state", s->state},
               {"status", sm::RunStatusName(s->status)},
               {"note", "run already finished"}});
  Status st = DecideAndStage(run_id, in);
  if (!st.ok()) return Err(2, st.message());
  *deferred_run = run_id;
  return Ok(ack);
}

proto::ClientResponse Broker::Cancel(const json& args, std::string* deferred_run) {
  const std::string run_id = args.value("run_id", "");
  sm::Input in;
  in.type = sm::Input::Type::kCancel;
  in.now_ms = NowMs();
  in.by = args.value("by", "client");
  return InputToLiveRun(run_id, in, {{"run_id", run_id}, {"cancel_requested", true}}, deferred_run);
}

bool Broker::MachineAddStaged(const std::string& name) const {
  auto it = turn_.staged.find(sm::kMachinesStream);
  if (it == turn_.staged.end()) return false;
  for (const proto::Event& e : it->second) {
    if (e.type() != sm::kMachineAdded) continue;
    Result<json> p = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
    if (p.ok() && p->is_object() && p->value("name", "") == name) return true;
  }
  return false;
}

proto::ClientResponse Broker::MachineVerb(const std::string& verb, const json& args, std::string* deferred_run) {
  if (verb == "machine.list") return Ok({{"machines", machines_.List()}});
  const std::string name = args.value("name", "");
  if (verb == "machine.show") {
    auto rec = machines_.Find(name);
    if (!rec) return Err(2, fmt::format("no machine '{}'; see `npuprof machine list`", name));
    return Ok(*rec);
  }
  if (verb == "machine.add") {
    json rec = args;
    Status st = sm::MachineInventory::ValidateAdd(rec);
    if (!st.ok()) return Err(2, st.message());
    if (machines_.Find(name) || MachineAddStaged(name))
      return Err(2, fmt::format("machine '{}' exists; remove it first with `npuprof machine remove {}`", name, name));
    StageMachineEvent(sm::kMachineAdded, rec);
    *deferred_run = sm::kMachinesStream;
    return Ok(rec);
  }
  if (verb == "machine.remove") {
    if (!machines_.Find(name)) return Err(2, fmt::format("no machine '{}'", name));
    StageMachineEvent(sm::kMachineRemoved, json{{"name", name}});
    *deferred_run = sm::kMachinesStream;
    return Ok({{"removed", name}});
  }
  return Err(2, fmt::format("unknown verb '{}'", verb));
}

proto::ClientResponse Broker::Workers() {
  json out = json::array();
  for (const auto& [identity, w] : dispatcher_.workers().all()) {
    out.push_back({{"worker_id", w.worker_id},
                   {"pid", w.pid},
                   {"kinds", w.kinds},
                   {"capacity", w.capacity},
                   {"tasks", w.tasks}});
  }
  return Ok({{"workers", out}, {"pending_tasks", dispatcher_.pending()}, {"in_flight_tasks", dispatcher_.in_flight()}});
}

proto::ClientResponse Broker::Signal(const json& args, std::string* deferred_run) {
  const std::string run_id = args.value("run_id", "");
  sm::Input in;
  in.type = sm::Input::Type::kSignal;
  in.now_ms = NowMs();
  in.signal = args.value("name", "");
  // Signals the server sends itself are not a client's to send.
  if (in.signal == sm::ev::kSignalWatchedRunFinished)
    return Err(2, fmt::format("signal '{}' is sent by the server itself when a watched run finishes; clients "
                              "send 'stop' (npuprof stop RUN)",
                              in.signal));
  in.result = args.value("payload", json::object());
  return InputToLiveRun(run_id, in, {{"run_id", run_id}, {"signal", in.signal}}, deferred_run);
}

proto::ClientResponse Broker::Verify(const json& args, std::string* deferred_run) {
  VerifyJob job;
  job.only = args.value("run_id", "");
  if (!job.only.empty() && !LoadRun(job.only)) {  // unknown, or stored but unreadable (then verify says why)
    auto stored = store_->HasEvents(job.only);
    if (!stored.ok() || !*stored) return Err(2, fmt::format("no run '{}'", job.only));
  }
  verify_queued_.push_back(std::move(job));
  *deferred_run = kVerifyLater;
  return Ok(json::object());
}

void Broker::LaunchVerifies() {
  if (verify_queued_.empty()) return;
  // Right after the turn's commit: the cache holds committed states only.
  for (VerifyJob& job : verify_queued_) {
    auto capture = [&](const std::string& id, const sm::RunState& s) {
      const sm::RunKind* k = kinds_.Find(s.kind);
      if (!k) return;
      job.served[id] = ServedProjection{s.last_seq,
                                        GuardedProjection("manifest", id, [&] { return k->Manifest(s); }).dump(),
                                        GuardedProjection("summary", id, [&] { return k->Summary(s); }).dump()};
    };
    if (!job.only.empty()) {
      if (auto it = runs_.find(job.only); it != runs_.end()) capture(it->first, it->second);
    } else {
      for (const auto& [id, s] : runs_) capture(id, s);
    }
    verifier_->Submit(std::move(job));
  }
  verify_queued_.clear();
}

void Broker::ReplyToVerifies() {
  while (wire::RecvFrames(verify_wake_, /*dontwait=*/true)) {
  }
  for (VerifyAnswer& a : verifier_->TakeDone()) {
    proto::ClientResponse r = Ok(a.body);
    r.set_exit_code(a.ok ? 0 : 1);
    ReplyNow(a.identity, r);
  }
}

proto::ClientResponse Broker::Import(const json& args, std::string* deferred_run) {
  const json& list = args.value("events", json::array());
  if (!list.is_array() || list.empty()) return Err(2, "events: expected the output of `npuprof events RUN --json`");
  std::vector<proto::Event> evs;
  const std::string run_id = args.value("run_id", "");
  if (!sm::IsSafeNameForId(run_id))
    return Err(2, "import: run_id must be the run's id (A-Z a-z 0-9 . _ -, 1-64 characters, not starting with _)");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    if (!e.is_object())
      return Err(2, fmt::format("import: events[{}] must be an object (one event of `npuprof events RUN --json`), "
                                "not {}",
                                i, JsonTypeWords(e)));
    for (const char* f : {"type", "cause", "prev_hash", "hash"})
      if (e.contains(f) && !e[f].is_string())
        return Err(2, fmt::format("import: events[{}].{} must be a string, not {}", i, f, JsonTypeWords(e[f])));
    for (const char* f : {"seq", "time_ms"})
      if (e.contains(f) && !HasShape(e[f], JsonShape::kUnsigned))
        return Err(2, fmt::format("import: events[{}].{} must be {}, not {}", i, f, ShapeWords(JsonShape::kUnsigned),
                                  JsonTypeWords(e[f])));
    proto::Event ev;
    ev.set_run_id(run_id);
    ev.set_seq(e.value("seq", uint64_t{0}));
    ev.set_type(e.value("type", ""));
    ev.set_time_ms(e.value("time_ms", int64_t{0}));
    ev.set_payload_json(e.contains("payload") ? e["payload"].dump() : "{}");
    ev.set_cause(e.value("cause", ""));
    ev.set_prev_hash(e.value("prev_hash", ""));
    ev.set_hash(e.value("hash", ""));
    evs.push_back(std::move(ev));
  }
  auto hasher = [](const proto::Event& e) { return store::EventHash(e); };
  auto vr = sm::VerifyRunEvents(kinds_, evs, hasher);
  if (!vr.ok) return Err(2, "refusing to import: " + vr.first_divergence);
  if (!vr.state.terminal) return Err(2, "refusing to import an unfinished run (it would be resumed here)");
  // Judged as a submission is: a replay that holds together is not enough.
  if (Status st = sm::JudgeImportedSubmission(kinds_, evs.front()); !st.ok())
    return Err(2, "refusing to import: event #1 (RunSubmitted): " + st.message());
  if (store_->LastSeq(run_id) != 0 || turn_.staged.count(run_id) || runs_.count(run_id))
    return Err(2, fmt::format("run '{}' already exists here", run_id));
  // Committed with this turn's other decisions (Commit), like any input.
  std::vector<std::string>& hashes = turn_.imported[run_id];
  for (const auto& e : evs) hashes.push_back(e.hash());
  turn_.expected_seq[run_id] = 0;
  turn_.follow_ups[run_id].assign(evs.size(), json::object());
  turn_.staged[run_id] = std::move(evs);
  vr.state.run_id = run_id;
  runs_[run_id] = std::move(vr.state);  // for the index row; dropped after the commit
  *deferred_run = run_id;
  return Ok({{"run_id", run_id}, {"events", hashes.size()}, {"imported", true}});
}

proto::ClientResponse Broker::Blob(const json& args) {
  auto data = store_->GetBlob(args.value("sha256", ""));
  if (!data) return Err(2, "no such blob");
  proto::ClientResponse r;
  r.set_ok(true);
  r.set_body_json(*data);  // raw bytes; the client knows this verb returns them as-is
  return r;
}

}  // namespace npuprof::broker
