// Helpers for the pure engine tests: a run driven input by input, with every
// decided event applied and kept as it would be stored.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "npuprof.pb.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/machine_check_machine.h"
#include "statemachine/probe_machine.h"

namespace npuprof::sm::testing {

// A spec that passes probe validation (the broker attaches machine_record).
inline json ProbeSpec() {
  return json{{"machine", "sim1"},
              {"machine_record", {{"name", "sim1"}, {"host", "127.0.0.1"}, {"user", "u"}, {"port", 22}}}};
}

// Two tasks at start ("a" then "b"); completes when both succeeded, fails
// when either fails for good. Lets tests have a finished and an in-flight
// task in one live run.
class TwoTaskKind : public RunKind {
 public:
  std::string_view name() const override { return "two-task"; }
  const TransitionTable& transitions() const override {
    static const TransitionTable table({{"queued", "working"},
                                        {"working", "completed"},
                                        {"working", "failed"},
                                        {"queued", "cancelled"},
                                        {"working", "cancelled"}},
                                       {"completed", "failed", "cancelled"});
    return table;
  }
  Status ValidateSpec(json&) const override { return Status::Ok(); }
  void OnStart(Decision& d) const override {
    d.Transition("working");
    TaskPolicy p;
    p.max_attempts = 2;
    d.ScheduleTask("test.a", json{{"n", 1}}, p);
    d.ScheduleTask("test.b", json{{"n", 2}}, p);
  }
  void OnTaskSucceeded(Decision& d, const TaskInfo&, const TaskResult&) const override {
    for (const auto& [id, t] : d.state().tasks)
      if (t.status != TaskStatus::kSucceeded) return;
    d.Finish(RunStatus::kOk);
  }
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure&) const override {
    d.AbandonOutstanding("sibling failed");
    d.Finish(RunStatus::kFailed, task.task_id + " failed");
  }
};

// A kind with the probe's transition table whose "goto" signal emits
// StateChanged{from: state, to: payload.to}: lets a test push any (from, to)
// pair through Decide.
class CraftedTransitionKind : public RunKind {
 public:
  std::string_view name() const override { return "crafted"; }
  const TransitionTable& transitions() const override { return probe_.transitions(); }
  Status ValidateSpec(json&) const override { return Status::Ok(); }
  void OnStart(Decision&) const override {}
  void OnTaskSucceeded(Decision&, const TaskInfo&, const TaskResult&) const override {}
  void OnTaskFailed(Decision&, const TaskInfo&, const TaskFailure&) const override {}
  bool AcceptsSignal(std::string_view n) const override { return n == "goto"; }
  void OnSignal(Decision& d, const std::string&, const json& payload) const override {
    d.Emit(ev::kStateChanged, json{{"from", d.state().state}, {"to", payload.value("to", "")}});
  }

 private:
  ProbeMachine probe_;
};

// Kinds for these tests: the real probe and machine-check machines plus the
// test kinds above (DefaultKinds() is not needed and pulls in every kind).
inline const KindRegistry& TestKinds() {
  static const KindRegistry* r = [] {
    auto* k = new KindRegistry();
    k->Register(std::make_unique<ProbeMachine>());
    k->Register(std::make_unique<MachineCheckMachine>());
    k->Register(std::make_unique<TwoTaskKind>());
    k->Register(std::make_unique<CraftedTransitionKind>());
    return k;
  }();
  return *r;
}

inline std::vector<std::string> Types(const std::vector<NewEvent>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) out.push_back(e.type);
  return out;
}

// One run: Step() decides an input, applies the events to the state and
// records them as stored events (seq, time, payload JSON, cause).
// Inputs as the broker builds them (Driver steps these; a test that needs
// the Input itself, e.g. to decide it twice, builds it here too).
inline Input SubmitInput(const std::string& kind, json spec, int64_t now = 1000) {
  Input in;
  in.type = Input::Type::kSubmit;
  in.now_ms = now;
  in.kind = kind;
  in.spec = std::move(spec);
  return in;
}

inline Input ResultInput(const std::string& task_id, uint32_t attempt, bool ok, int64_t now,
                         bool retryable = false, json result = json::object(),
                         const std::string& error_kind = "") {
  Input in;
  in.type = Input::Type::kTaskResult;
  in.now_ms = now;
  in.task_id = task_id;
  in.attempt = attempt;
  in.ok = ok;
  in.retryable = retryable;
  in.result = std::move(result);
  in.worker = "w1";
  if (!ok) {
    in.error = "simulated failure";
    in.error_kind = error_kind.empty() ? "unreachable" : error_kind;
  }
  return in;
}

inline Input TimerInput(const std::string& timer_id, int64_t now) {
  Input in;
  in.type = Input::Type::kTimerFired;
  in.now_ms = now;
  in.timer_id = timer_id;
  return in;
}

class Driver {
 public:
  explicit Driver(std::string run_id = "r1", const KindRegistry& kinds = TestKinds()) : kinds_(kinds) {
    state_.run_id = std::move(run_id);
  }

  Result<std::vector<NewEvent>> TryStep(const Input& in) {
    auto r = Decide(kinds_, state_, in);
    if (!r.ok()) return r;
    for (const auto& ne : *r) {
      const uint64_t seq = state_.last_seq + 1;
      Apply(kinds_, state_, ne.type, ne.payload, seq, in.now_ms);
      proto::Event e;
      e.set_run_id(state_.run_id);
      e.set_seq(seq);
      e.set_type(ne.type);
      e.set_time_ms(in.now_ms);
      e.set_payload_json(ne.payload.dump());
      e.set_cause(ne.cause);
      log_.push_back(std::move(e));
    }
    return r;
  }

  std::vector<NewEvent> Step(const Input& in) {
    auto r = TryStep(in);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<NewEvent>{};
  }

  std::vector<NewEvent> Submit(const std::string& kind, json spec, int64_t now = 1000) {
    return Step(SubmitInput(kind, std::move(spec), now));
  }

  std::vector<NewEvent> Report(const std::string& task_id, uint32_t attempt, bool ok, int64_t now,
                               bool retryable = false, json result = json::object(),
                               const std::string& error_kind = "") {
    return Step(ResultInput(task_id, attempt, ok, now, retryable, std::move(result), error_kind));
  }

  std::vector<NewEvent> Timer(const std::string& timer_id, int64_t now) { return Step(TimerInput(timer_id, now)); }

  std::vector<NewEvent> WorkerLost(const std::string& task_id, uint32_t attempt, int64_t now) {
    Input in;
    in.type = Input::Type::kWorkerLost;
    in.now_ms = now;
    in.task_id = task_id;
    in.attempt = attempt;
    in.worker = "w1";
    return Step(in);
  }

  std::vector<NewEvent> Cancel(int64_t now) {
    Input in;
    in.type = Input::Type::kCancel;
    in.now_ms = now;
    in.by = "test";
    return Step(in);
  }

  std::vector<NewEvent> Recover(int64_t now) {
    Input in;
    in.type = Input::Type::kRecover;
    in.now_ms = now;
    return Step(in);
  }

  const RunState& state() const { return state_; }
  const std::vector<proto::Event>& log() const { return log_; }
  const KindRegistry& kinds() const { return kinds_; }
  json Summary() const { return kinds_.Find(state_.kind)->Summary(state_); }
  const TaskInfo& task(const std::string& id) const {
    const TaskInfo* t = state_.FindTask(id);
    EXPECT_NE(t, nullptr) << id;
    static const TaskInfo none;
    return t ? *t : none;
  }

 private:
  const KindRegistry& kinds_;
  RunState state_;
  std::vector<proto::Event> log_;
};

}  // namespace npuprof::sm::testing
