// For pure engine tests of multi-node runs: drives one run of a kind through
// Decide/Apply like the broker does, answers tasks by kind and by the
// machine they were sent to, and moves the device lease the broker's way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/lease_inputs.h"
#include "statemachine/engine.h"
#include "statemachine/run_state_queries.h"

namespace npuprof::sm::testing {

class KindDriver {
 public:
  explicit KindDriver(std::unique_ptr<RunKind> kind, std::string run_id = "r1") {
    kind_name_ = std::string(kind->name());
    reg_.Register(std::move(kind));
    s.run_id = std::move(run_id);
  }

  Result<std::vector<NewEvent>> Try(Input in) {
    in.now_ms = (now += 10);
    auto r = Decide(reg_, s, in);
    if (r.ok())
      for (const auto& e : *r) {
        Apply(reg_, s, e.type, e.payload, s.last_seq + 1, now);
        all.push_back(e);
      }
    return r;
  }
  std::vector<NewEvent> Do(Input in) {
    auto r = Try(std::move(in));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<NewEvent>{};
  }
  // Submits and, unless told not to, answers the lease probes and grants.
  void Submit(json spec, bool lease = true) {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = kind_name_;
    in.spec = std::move(spec);
    Do(in);
    if (lease)
      while (auto next = NextLeaseInput(s)) Do(*next);
  }
  // The in-flight tasks of `kind` sent to `machine` ("" = any machine).
  std::vector<const TaskInfo*> PendingAll(const std::string& kind, const std::string& machine = "") const {
    std::vector<const TaskInfo*> out;
    for (const auto& [id, t] : s.tasks)
      if (t.kind == kind && t.in_flight() && (machine.empty() || TaskMachine(t) == machine)) out.push_back(&t);
    return out;
  }
  const TaskInfo* Pending(const std::string& kind, const std::string& machine = "") const {
    auto all_pending = PendingAll(kind, machine);
    return all_pending.empty() ? nullptr : all_pending.front();
  }
  // Answers the pending task of `kind` on `machine`.
  void Answer(const std::string& kind, const std::string& machine, bool ok, json result,
              const std::string& error_kind = "") {
    const TaskInfo* t = Pending(kind, machine);
    ASSERT_NE(t, nullptr) << "no pending " << kind << " on '" << machine << "' in state " << s.state;
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = ok;
    in.error_kind = error_kind;
    in.error = ok ? "" : "boom";
    in.result = std::move(result);
    Do(in);
  }
  // The user cancels the run.
  void Cancel() {
    Input in;
    in.type = Input::Type::kCancel;
    Do(in);
  }
  std::vector<std::string> Types() const {
    std::vector<std::string> out;
    for (const auto& e : all) out.push_back(e.type);
    return out;
  }

  RunState s;
  std::vector<NewEvent> all;
  int64_t now = 1'000'000;

 private:
  KindRegistry reg_;
  std::string kind_name_;
};

}  // namespace npuprof::sm::testing
