#include "statemachine/engine.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "statemachine/device_lease.h"
#include "statemachine/event_types.h"
#include "statemachine/forget_ended.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/task_schema.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

// ------------------------------------------------------------------ registry

void KindRegistry::Register(std::unique_ptr<RunKind> kind) {
  std::string n(kind->name());
  kinds_[n] = std::move(kind);
}

const RunKind* KindRegistry::Find(std::string_view name) const {
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : it->second.get();
}

std::vector<std::string> KindRegistry::Names() const {
  std::vector<std::string> out;
  for (const auto& [n, k] : kinds_) out.push_back(n);
  return out;
}

// ------------------------------------------------------------------ policy

json TaskPolicyToJson(const TaskPolicy& p) {
  return {{"max_attempts", p.max_attempts},
          {"backoff_ms", p.backoff_ms},
          {"max_backoff_ms", p.max_backoff_ms},
          {"lease_ms", p.lease_ms}};
}

TaskPolicy TaskPolicyFromJson(const json& j) {
  TaskPolicy p;
  if (!j.is_object()) return p;
  p.max_attempts = j.value("max_attempts", p.max_attempts);
  p.backoff_ms = j.value("backoff_ms", p.backoff_ms);
  p.max_backoff_ms = j.value("max_backoff_ms", p.max_backoff_ms);
  p.lease_ms = j.value("lease_ms", p.lease_ms);
  return p;
}

int64_t RetryDelayMs(const TaskPolicy& policy, uint32_t next_attempt) {
  int64_t d = policy.backoff_ms;
  for (uint32_t a = 2; a < next_attempt && d < policy.max_backoff_ms; ++a) d *= 2;
  return std::min(d, policy.max_backoff_ms);
}

// ------------------------------------------------------------------ apply

bool Apply(const KindRegistry& kinds, RunState& s, const std::string& type, const json& p, uint64_t seq,
           int64_t time_ms) {
  const RunKind* kind = kinds.Find(type == ev::kRunSubmitted ? p.value("kind", "") : s.kind);
  return ApplyWith(kind, s, type, p, seq, time_ms);
}

bool ApplyWith(const RunKind* kind, RunState& s, const std::string& type, const json& p, uint64_t seq,
               int64_t time_ms) {
  s.last_seq = seq;
  s.updated_ms = time_ms;
  if (type == ev::kRunSubmitted) {
    s.kind = p.value("kind", "");
    s.spec = p.value("spec", json::object());
    // Read by the kinds as its message from here on (typed_spec.h); a spec
    // that cannot be read is the fold's error (ApplyStored: Corruption).
    if (Status st = RefreshTypedSpec(s, kind); !st.ok()) throw std::runtime_error(st.message());
    s.machine = p.value("machine", "");
    s.tag = p.value("tag", "");
    s.state = "queued";
    s.created_ms = time_ms;
  } else if (type == ev::kStateChanged) {
    // A stored event may carry a state's old name; the fold keeps today's.
    const std::string to = p.value("to", s.state);
    s.state = kind ? kind->transitions().Current(to) : to;
  } else if (type == ev::kTaskScheduled) {
    TaskInfo t;
    t.task_id = p.value("task_id", "");
    t.kind = p.value("kind", "");
    t.attempt = p.value("attempt", 1u);
    t.payload = p.value("payload", json::object());
    t.policy = TaskPolicyFromJson(p.value("policy", json::object()));
    ForgetEndedTasks(kind, s, t.kind);  // a kind that repeats it without bound (forget_ended.h)
    if (IsLeaseProbe(t)) s.lease.phase = LeasePhase::kProbing;
    s.tasks[t.task_id] = std::move(t);
    s.next_task_no++;
  } else if (type == ev::kTaskSucceeded) {
    auto it = s.tasks.find(p.value("task_id", ""));
    if (it != s.tasks.end()) {
      it->second.status = TaskStatus::kSucceeded;
      it->second.result = p;
    }
  } else if (type == ev::kTaskFailed) {
    auto it = s.tasks.find(p.value("task_id", ""));
    if (it != s.tasks.end()) {
      it->second.failures++;
      if (p.value("final", true)) {
        it->second.status = TaskStatus::kFailed;
        it->second.result = p;
      } else {
        it->second.status = TaskStatus::kRetryWait;
      }
    }
  } else if (type == ev::kTaskRetryScheduled) {
    TimerInfo t;
    t.timer_id = p.value("timer_id", "");
    t.purpose = "retry";
    t.deadline_ms = p.value("deadline_ms", int64_t{0});
    t.payload = {{"task_id", p.value("task_id", "")}};
    s.timers[t.timer_id] = std::move(t);
    s.next_timer_no++;
  } else if (type == ev::kTaskRedispatched) {
    auto it = s.tasks.find(p.value("task_id", ""));
    if (it != s.tasks.end()) {
      it->second.attempt = p.value("attempt", it->second.attempt + 1);
      it->second.status = TaskStatus::kPending;
      if (p.value("reason", "") == "worker_lost") it->second.failures++;
    }
  } else if (type == ev::kTaskAbandoned) {
    auto it = s.tasks.find(p.value("task_id", ""));
    if (it != s.tasks.end()) it->second.status = TaskStatus::kAbandoned;
  } else if (type == ev::kTimerScheduled) {
    TimerInfo t;
    t.timer_id = p.value("timer_id", "");
    t.purpose = p.value("purpose", "");
    t.deadline_ms = p.value("deadline_ms", int64_t{0});
    t.payload = p.value("payload", json::object());
    ForgetFiredTimers(kind, s, t.purpose);  // a kind that repeats it without bound (forget_ended.h)
    s.timers[t.timer_id] = std::move(t);
    s.next_timer_no++;
  } else if (type == ev::kTimerFired || type == ev::kTimerCancelled) {
    auto it = s.timers.find(p.value("timer_id", ""));
    if (it != s.timers.end()) it->second.armed = false;
  } else if (type == ev::kCancelRequested) {
    s.cancel_requested = true;
  } else if (type == ev::kWatchRequested) {
    s.watching.push_back(p.value("run_id", ""));
  } else if (type == ev::kChildRunRequested) {
    s.requested_children.push_back(p.value("run_id", ""));
    // The kind keeps its own record of the child too (a sweep: its point).
    if (kind == nullptr) return false;
    kind->ApplyKindEvent(s, type, p);
    return true;
  } else if (type == ev::kSignalReceived) {
    if (p.value("name", "") == ev::kSignalWatchedRunFinished) {
      const std::string done = p.value("payload", json::object()).value("run_id", "");
      s.watching.erase(std::remove(s.watching.begin(), s.watching.end(), done), s.watching.end());
    }
  } else if (type == ev::kRunRecovered) {
    s.recoveries++;
  } else if (type == ev::kRunFinished) {
    // A stored RunFinished names how the run ended; any other name is
    // unreadable (ApplyStored: Corruption). A missing status folds as failed.
    const std::string name = p.value("status", std::string(RunStatusName(RunStatus::kFailed)));
    const std::optional<RunStatus> status = ParseRunStatus(name);
    if (!status || *status == RunStatus::kRunning)
      throw std::runtime_error(fmt::format("RunFinished status '{}' is not ok, failed or cancelled", name));
    s.status = *status;
    s.error = p.value("error", "");
    s.terminal = true;
    s.finished_ms = time_ms;
  } else if (type == ev::kTaskResultIgnored) {
    // audit only
  } else if (ApplyLeaseEvent(s, type, p)) {
    // device lease (statemachine/device_lease.h); leased devices may have
    // become the spec's
    if (type == kDevicesLeased)
      if (Status st = RefreshTypedSpec(s, kind); !st.ok()) throw std::runtime_error(st.message());
  } else if (kind) {
    kind->ApplyKindEvent(s, type, p);
    return true;
  }
  return false;
}

namespace {

// A staged event's payload was built by the engine itself: it parses.
json StagedPayloadOf(const proto::Event& e) {
  Result<json> p = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
  return p.ok() ? std::move(p).value() : json::object();
}

}  // namespace

Status ApplyStored(const KindRegistry& kinds, RunState& s, const proto::Event& e, bool* to_kind) {
  Result<json> parsed = ParseJson(e.payload_json(), kMaxOwnJsonDepth);
  if (!parsed.ok())
    return Status::Corruption(fmt::format("run {} event #{} ({}): the payload is {}", e.run_id(), e.seq(), e.type(),
                                          parsed.status().message()));
  const json p = std::move(parsed).value();
  if (!p.is_object())
    return Status::Corruption(fmt::format("run {} event #{} ({}): the payload is not a JSON object", e.run_id(),
                                          e.seq(), e.type()));
  if (s.run_id.empty()) s.run_id = e.run_id();
  try {
    const bool kind_read = Apply(kinds, s, e.type(), p, e.seq(), e.time_ms());
    if (to_kind != nullptr) *to_kind = kind_read;
  } catch (const std::exception& ex) {
    return Status::Corruption(
        fmt::format("run {} event #{} ({}): the fold cannot read it: {}", e.run_id(), e.seq(), e.type(), ex.what()));
  }
  if (e.type() == kDevicesRequested) s.lease.request_pos = e.global_pos();
  s.last_hash = e.hash();
  return Status::Ok();
}

void ApplyStaged(const KindRegistry& kinds, RunState& s, const proto::Event& e) {
  Apply(kinds, s, e.type(), StagedPayloadOf(e), s.last_seq + 1, e.time_ms());
}

Result<RunState> Fold(const KindRegistry& kinds, const std::vector<proto::Event>& events) {
  RunState s;
  for (const auto& e : events)
    if (Status st = ApplyStored(kinds, s, e); !st.ok()) return st;
  return s;
}

// ------------------------------------------------------------------ decide

std::string InputCause(const Input& in) {
  switch (in.type) {
    case Input::Type::kSubmit: return "submit";
    case Input::Type::kTaskResult: return fmt::format("task:{}#{}", in.task_id, in.attempt);
    case Input::Type::kTimerFired: return fmt::format("timer:{}", in.timer_id);
    case Input::Type::kCancel: return fmt::format("cancel:{}", in.by.empty() ? "client" : in.by);
    case Input::Type::kWorkerLost: return fmt::format("worker_lost:{}", in.worker);
    case Input::Type::kRecover: return "recovery";
    case Input::Type::kSignal: return fmt::format("signal:{}", in.signal);
    case Input::Type::kLeaseGranted: return "lease:granted";
    case Input::Type::kLeaseRefused: return "lease:refused";
    case Input::Type::kCheckDevices: return "lease:check_quarantined";
  }
  return "unknown";
}

namespace {

void Ignore(Decision& d, const Input& in, const std::string& reason) {
  d.Emit(ev::kTaskResultIgnored, json{{"task_id", in.task_id},
                                      {"attempt", in.attempt},
                                      {"ok", in.ok},
                                      {"worker", in.worker},
                                      {"reason", reason}});
}

// A failure of the task's current attempt: retry or give up.
void OnFailure(const RunKind& kind, Decision& d, const TaskInfo& task, json failure, bool retryable) {
  const bool can_retry = retryable && !d.state().cancel_requested && !d.state().terminal &&
                         task.failures + 1 < task.policy.max_attempts;
  failure["final"] = !can_retry;
  d.Emit(ev::kTaskFailed, failure);
  if (can_retry) {
    const uint32_t next = task.attempt + 1;
    const std::string timer_id = fmt::format("{}.tm{}", d.state().run_id, d.state().next_timer_no);
    d.Emit(ev::kTaskRetryScheduled, json{{"task_id", task.task_id},
                                         {"next_attempt", next},
                                         {"timer_id", timer_id},
                                         {"deadline_ms", d.now_ms() + RetryDelayMs(task.policy, task.failures + 2)}});
    return;
  }
  const TaskInfo* after = d.state().FindTask(task.task_id);
  const TaskFailure failed(failure);
  if (IsLeaseProbe(task)) return OnLeaseProbeFailed(d, task, failed);
  if (IsQuarantineProbe(task)) return OnQuarantineProbeFailed(d, task, failed);
  kind.OnTaskFailed(d, after ? *after : task, failed);
}

}  // namespace

Result<std::vector<NewEvent>> Decide(const KindRegistry& kinds, const RunState& state, const Input& in) {
  auto decided = DecideWithState(kinds, state, in);
  if (!decided.ok()) return decided.status();
  return std::move(decided->events);
}

Result<Decided> DecideWithState(const KindRegistry& kinds, const RunState& state, const Input& in) {
  return DecideWithState(kinds, RunState(state), in);
}

// The decision works on the moved-in state: every check below reads it
// before the first event is applied, and what is needed after that (a task's
// or timer's fields as they were) is copied out first.
Result<Decided> DecideWithState(const KindRegistry& kinds, RunState&& moved_in, const Input& in) {
  const std::string kind_name = in.type == Input::Type::kSubmit ? in.kind : moved_in.kind;
  const RunKind* kind = kinds.Find(kind_name);
  if (!kind) return Status::Invalid(fmt::format("unknown run kind '{}'; known kinds: {}", kind_name,
                                                fmt::join(kinds.Names(), ", ")));
  Decision d(*kind, std::move(moved_in), in.now_ms, InputCause(in));
  const RunState& state = d.state();  // changes as events are applied

  switch (in.type) {
    case Input::Type::kSubmit: {
      if (state.last_seq != 0) return Status::Conflict("run " + state.run_id + " already exists");
      json spec = in.spec.is_object() ? in.spec : json::object();
      Status st = kind->ValidateSpec(spec);
      if (!st.ok()) return st;
      if (st = CheckRunSpec(kind_name, spec); !st.ok()) return st;
      d.Emit(ev::kRunSubmitted, json{{"kind", kind_name},
                                     {"spec", spec},
                                     {"machine", spec.value("machine", "")},
                                     {"tag", spec.value("tag", "")}});
      RequestDevicesOrStart(*kind, d);
      break;
    }
    case Input::Type::kTaskResult: {
      const TaskInfo* task = state.FindTask(in.task_id);  // as it was: read before any Emit
      if (!task) {
        Ignore(d, in, "unknown task");
        break;
      }
      if (state.terminal) {
        // Nothing follows RunFinished (the verifier holds the log to that):
        // a late result, e.g. of a task abandoned at the end, changes nothing
        // and is not recorded (the broker logs it).
        break;
      }
      if (task->attempt != in.attempt) {
        Ignore(d, in, fmt::format("stale attempt (current attempt is {})", task->attempt));
        break;
      }
      if (!task->in_flight()) {
        Ignore(d, in, fmt::format("duplicate result (task is {})", TaskStatusName(task->status)));
        break;
      }
      // A result is held to its message (task_schema.h) here too, not only
      // by our own worker: whatever answers, nothing undeclared reaches the
      // log or the kind. A success whose result does not fit is a final
      // failure (bad_result); a failure's result that does not fit is dropped.
      auto typed = DecodeTaskResult(task->kind, in.result);
      const Status fits = typed.status();
      if (in.ok && !fits.ok()) {
        json f = {{"task_id", in.task_id},
                  {"attempt", in.attempt},
                  {"error", fmt::format("worker {} answered a result npuprof cannot read: {}; the task failed rather "
                                        "than the run reading it",
                                        in.worker, fits.message())},
                  {"error_kind", "bad_result"},
                  {"retryable", false},
                  {"worker", in.worker}};
        if (in.blobs.is_object() && !in.blobs.empty()) f["blobs"] = in.blobs;
        if (in.link.is_object()) f["link"] = in.link;
        const TaskInfo before = *task;
        OnFailure(*kind, d, before, f, false);
      } else if (in.ok) {
        json p = {{"task_id", in.task_id}, {"attempt", in.attempt}, {"result", in.result}, {"worker", in.worker}};
        if (in.blobs.is_object() && !in.blobs.empty()) p["blobs"] = in.blobs;
        if (in.link.is_object()) p["link"] = in.link;
        d.Emit(ev::kTaskSucceeded, p);
        const TaskInfo* after = d.state().FindTask(in.task_id);
        const TaskResult result(after->kind, in.result, std::move(typed).value());
        if (IsLeaseProbe(*after)) OnLeaseProbeSucceeded(*kind, d, *after, result);
        else if (IsQuarantineProbe(*after)) OnQuarantineProbeSucceeded(d, *after, result);
        else kind->OnTaskSucceeded(d, *after, result);
      } else {
        json f = {{"task_id", in.task_id},   {"attempt", in.attempt}, {"error", in.error},
                  {"error_kind", in.error_kind}, {"retryable", in.retryable}, {"worker", in.worker}};
        if (!in.result.is_null() && fits.ok()) f["result"] = in.result;
        if (!fits.ok()) f["error"] = fmt::format("{} (its result was dropped: {})", in.error, fits.message());
        if (in.blobs.is_object() && !in.blobs.empty()) f["blobs"] = in.blobs;
        if (in.link.is_object()) f["link"] = in.link;
        const TaskInfo before = *task;  // OnFailure reads it after applying TaskFailed
        OnFailure(*kind, d, before, f, in.retryable);
      }
      break;
    }
    case Input::Type::kTimerFired: {
      auto it = state.timers.find(in.timer_id);
      if (it == state.timers.end() || !it->second.armed || state.terminal) break;
      const TimerInfo timer = it->second;  // as armed, before TimerFired is applied
      d.Emit(ev::kTimerFired, json{{"timer_id", in.timer_id}});
      if (timer.purpose == "retry") {
        const TaskInfo* task = d.state().FindTask(timer.payload.value("task_id", ""));
        if (task && task->status == TaskStatus::kRetryWait)
          d.Emit(ev::kTaskRedispatched,
                 json{{"task_id", task->task_id}, {"attempt", task->attempt + 1}, {"reason", "retry"}});
      } else {
        kind->OnTimer(d, timer);
      }
      break;
    }
    case Input::Type::kCancel: {
      if (state.terminal || state.cancel_requested) break;
      d.Emit(ev::kCancelRequested, json{{"by", in.by.empty() ? "client" : in.by}});
      kind->OnCancel(d);
      break;
    }
    case Input::Type::kWorkerLost: {
      const TaskInfo* task = state.FindTask(in.task_id);
      if (!task || !task->in_flight() || task->attempt != in.attempt || state.terminal) break;
      if (task->failures + 1 < task->policy.max_attempts) {
        d.Emit(ev::kTaskRedispatched, json{{"task_id", in.task_id},
                                          {"attempt", task->attempt + 1},
                                          {"reason", "worker_lost"},
                                          {"worker", in.worker}});
      } else {
        const TaskInfo before = *task;  // OnFailure reads it after applying TaskFailed
        OnFailure(*kind, d, before,
                  json{{"task_id", in.task_id},
                       {"attempt", in.attempt},
                       {"error", fmt::format("the worker holding the task was lost {} times", task->failures + 1)},
                       {"error_kind", "worker_lost"},
                       {"retryable", false},
                       {"worker", in.worker}},
                  false);
      }
      break;
    }
    case Input::Type::kSignal: {
      if (state.terminal) break;
      if (!kind->AcceptsSignal(in.signal))
        return Status::Invalid(fmt::format("a {} run does not accept '{}'", kind_name, in.signal));
      d.Emit(ev::kSignalReceived, json{{"name", in.signal}, {"payload", in.result.is_null() ? json::object() : in.result}});
      kind->OnSignal(d, in.signal, in.result.is_null() ? json::object() : in.result);
      break;
    }
    case Input::Type::kLeaseGranted: {
      const LeaseGrant grant = in.legs.empty() ? LeaseGrant{LeaseGrantLeg{"", in.devices}} : in.legs;
      if (Status st = CheckLeaseGrant(state, grant); !st.ok()) return st;
      OnLeaseGranted(*kind, d, grant);
      break;
    }
    case Input::Type::kCheckDevices: {
      CheckQuarantinedDevices(*kind, d, in.machine, in.devices);
      break;
    }
    case Input::Type::kLeaseRefused: {
      if (state.terminal || state.lease.phase != LeasePhase::kWaiting) break;
      OnLeaseRefused(d, in.error);
      break;
    }
    case Input::Type::kRecover: {
      if (state.terminal) break;
      json outstanding = json::array(), timers = json::array();
      std::vector<std::pair<std::string, uint32_t>> redispatch;  // (task, attempt) before RunRecovered
      for (const auto& [id, t] : state.tasks) {
        if (!t.in_flight()) continue;
        outstanding.push_back({{"task_id", id}, {"kind", t.kind}, {"attempt", t.attempt}});
        redispatch.emplace_back(id, t.attempt);
      }
      for (const auto& [id, t] : state.timers)
        if (t.armed) timers.push_back({{"timer_id", id}, {"purpose", t.purpose}, {"deadline_ms", t.deadline_ms}});
      d.Emit(ev::kRunRecovered, json{{"outstanding_tasks", outstanding}, {"armed_timers", timers}});
      for (const auto& [id, attempt] : redispatch)
        d.Emit(ev::kTaskRedispatched, json{{"task_id", id}, {"attempt", attempt + 1}, {"reason", "recovery"}});
      break;
    }
  }
  // Tasks whose payload did not match their message fail at once, final,
  // before any worker sees them; the kind's failure path may schedule more
  // (cleanup), which are judged the same way. Bounded: a kind that keeps
  // building bad payloads gets the decision refused.
  for (int round = 0; !d.failed(); ++round) {
    auto refused = d.TakeRefusedTasks();
    if (refused.empty()) break;
    if (round == 8) return Status::Internal(fmt::format("run {}: {}", state.run_id, refused.front().second));
    for (const auto& [task_id, why] : refused) {
      const TaskInfo* task = d.state().FindTask(task_id);
      if (task == nullptr || !task->in_flight()) continue;
      const TaskInfo before = *task;
      OnFailure(*kind, d, before,
                json{{"task_id", task_id}, {"attempt", before.attempt}, {"error", why}, {"error_kind", "bad_payload"},
                     {"retryable", false}, {"worker", ""}},
                /*retryable=*/false);
    }
  }
  if (d.failed()) return d.status();
  return std::move(d).Take();
}

}  // namespace npuprof::sm
