// Decide() for the inputs every run kind shares: submit, task results,
// retries with backoff, timers, lost workers, cancel, recovery, signals.
#include <gtest/gtest.h>

#include "sm_test_util.h"

namespace npuprof::sm::testing {
namespace {

using Strings = std::vector<std::string>;

// ---------------------------------------------------------------- submit

TEST(DecideSubmit, ValidProbeSchedulesTheNpuSmiTask) {
  Driver run;
  auto evs = run.Submit("probe", ProbeSpec(), 1000);
  EXPECT_EQ(Types(evs), (Strings{"RunSubmitted", "StateChanged", "TaskScheduled"}));
  EXPECT_EQ(evs[0].payload["kind"], "probe");
  EXPECT_EQ(evs[0].payload["machine"], "sim1");
  EXPECT_EQ(evs[0].payload["spec"]["busy_threshold_mb"], 4096);  // default filled in
  EXPECT_EQ(evs[1].payload["from"], "queued");
  EXPECT_EQ(evs[1].payload["to"], "probing");
  EXPECT_EQ(evs[2].payload["kind"], kProbeTask);
  EXPECT_EQ(evs[2].payload["attempt"], 1);
  EXPECT_EQ(evs[2].payload["task_id"], "r1.t1");
  EXPECT_EQ(evs[2].payload["payload"]["machine"]["host"], "127.0.0.1");
  for (const auto& e : evs) EXPECT_EQ(e.cause, "submit");
  EXPECT_EQ(run.state().state, "probing");
  EXPECT_EQ(run.state().status, RunStatus::kRunning);
  EXPECT_EQ(run.state().last_seq, 3u);
  EXPECT_TRUE(run.task("r1.t1").in_flight());
}

struct BadSpec {
  const char* what;
  json spec;
  const char* field;  // the error must name it
};

TEST(DecideSubmit, SpecValidationErrorsNameTheField) {
  std::vector<BadSpec> cases;
  cases.push_back({"no machine", json::object(), "machine"});
  {
    json s = ProbeSpec();
    s["machine"] = "bad name;rm";
    cases.push_back({"unsafe machine name", s, "machine"});
  }
  {
    json s = ProbeSpec();
    s["tag"] = "has space";
    cases.push_back({"unsafe tag", s, "tag"});
  }
  {
    json s = ProbeSpec();
    s["busy_threshold_mb"] = -1;
    cases.push_back({"negative threshold", s, "busy_threshold_mb"});
  }
  {
    json s = ProbeSpec();
    s["busy_threshold_mb"] = "lots";
    cases.push_back({"threshold not a number", s, "busy_threshold_mb"});
  }
  {
    json s = ProbeSpec();
    s.erase("machine_record");
    cases.push_back({"machine not in inventory", s, "machine"});
  }
  for (const auto& c : cases) {
    RunState fresh;
    fresh.run_id = "r1";
    Input in;
    in.type = Input::Type::kSubmit;
    in.now_ms = 1000;
    in.kind = "probe";
    in.spec = c.spec;
    auto r = Decide(TestKinds(), fresh, in);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.what;
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << c.what << ": " << r.status().message();
  }
}

TEST(DecideSubmit, UnknownKindIsRefusedAndNamesTheKnownOnes) {
  RunState fresh;
  fresh.run_id = "r1";
  Input in;
  in.type = Input::Type::kSubmit;
  in.kind = "teleport";
  in.spec = ProbeSpec();
  auto r = Decide(TestKinds(), fresh, in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("teleport"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("probe"), std::string::npos) << r.status().message();
}

TEST(DecideSubmit, SubmittingAnExistingRunConflicts) {
  Driver run;
  run.Submit("probe", ProbeSpec());
  Input in;
  in.type = Input::Type::kSubmit;
  in.kind = "probe";
  in.spec = ProbeSpec();
  auto r = run.TryStep(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kConflict);
  EXPECT_EQ(run.state().last_seq, 3u);
}

// ---------------------------------------------------------------- results

TEST(DecideResult, SuccessRecordsTheProbeAndCompletes) {
  Driver run;
  run.Submit("probe", ProbeSpec());
  Input in;
  in.type = Input::Type::kTaskResult;
  in.now_ms = 2000;
  in.task_id = "r1.t1";
  in.attempt = 1;
  in.ok = true;
  in.result = json{{"device_count", 8}, {"free_devices", {0, 1}}};
  in.blobs = json{{"npu_smi_info.txt", std::string(64, 'a')}};
  in.worker = "w1";
  auto evs = run.Step(in);
  EXPECT_EQ(Types(evs), (Strings{"TaskSucceeded", "ProbeRecorded", "StateChanged", "RunFinished"}));
  EXPECT_EQ(evs[0].payload["attempt"], 1);
  EXPECT_EQ(evs[0].payload["blobs"]["npu_smi_info.txt"], std::string(64, 'a'));
  EXPECT_EQ(evs[1].payload["device_count"], 8);
  EXPECT_EQ(evs[1].payload["evidence"]["npu_smi_info.txt"], std::string(64, 'a'));
  EXPECT_EQ(evs[2].payload["to"], "completed");
  EXPECT_EQ(evs[3].payload["status"], "ok");
  EXPECT_EQ(evs[0].cause, "task:r1.t1#1");
  EXPECT_TRUE(run.state().terminal);
  EXPECT_EQ(run.state().status, RunStatus::kOk);
  EXPECT_EQ(run.state().state, "completed");
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kSucceeded);
  EXPECT_EQ(run.Summary()["probe"]["device_count"], 8);
}

TEST(DecideResult, RetryableFailureSchedulesARetryWithBackoff) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto evs = run.Report("r1.t1", 1, false, 2000, /*retryable=*/true);
  ASSERT_EQ(Types(evs), (Strings{"TaskFailed", "TaskRetryScheduled"}));
  EXPECT_EQ(evs[0].payload["final"], false);
  EXPECT_EQ(evs[0].payload["error_kind"], "unreachable");
  EXPECT_EQ(evs[1].payload["task_id"], "r1.t1");
  EXPECT_EQ(evs[1].payload["next_attempt"], 2);
  EXPECT_EQ(evs[1].payload["deadline_ms"], 2000 + 500);  // probe backoff 500 ms
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kRetryWait);
  EXPECT_FALSE(run.state().terminal);
  const std::string timer = evs[1].payload["timer_id"];
  ASSERT_TRUE(run.state().timers.count(timer));
  EXPECT_TRUE(run.state().timers.at(timer).armed);
  EXPECT_EQ(run.state().timers.at(timer).purpose, "retry");

  // The timer fires: same task id, next attempt.
  auto fired = run.Timer(timer, 2600);
  ASSERT_EQ(Types(fired), (Strings{"TimerFired", "TaskRedispatched"}));
  EXPECT_EQ(fired[1].payload["attempt"], 2);
  EXPECT_EQ(fired[1].payload["reason"], "retry");
  EXPECT_EQ(fired[1].payload["task_id"], "r1.t1");
  EXPECT_EQ(run.task("r1.t1").attempt, 2u);
  EXPECT_TRUE(run.task("r1.t1").in_flight());
  EXPECT_FALSE(run.state().timers.at(timer).armed);

  // Firing it again (or a timer that does not exist) does nothing.
  EXPECT_TRUE(run.Timer(timer, 2700).empty());
  EXPECT_TRUE(run.Timer("r1.tm99", 2700).empty());

  // Second failure: the backoff doubles.
  auto second = run.Report("r1.t1", 2, false, 3000, true);
  ASSERT_EQ(Types(second), (Strings{"TaskFailed", "TaskRetryScheduled"}));
  EXPECT_EQ(second[1].payload["next_attempt"], 3);
  EXPECT_EQ(second[1].payload["deadline_ms"], 3000 + 1000);
}

TEST(DecideResult, BackoffIsExponentialAndCapped) {
  TaskPolicy p;
  p.backoff_ms = 1000;
  p.max_backoff_ms = 5000;
  EXPECT_EQ(RetryDelayMs(p, 2), 1000);
  EXPECT_EQ(RetryDelayMs(p, 3), 2000);
  EXPECT_EQ(RetryDelayMs(p, 4), 4000);
  EXPECT_EQ(RetryDelayMs(p, 5), 5000);
  EXPECT_EQ(RetryDelayMs(p, 6), 5000);
  EXPECT_EQ(RetryDelayMs(p, 1000), 5000);  // no overflow for absurd attempt numbers
  TaskPolicy tiny_cap;
  tiny_cap.backoff_ms = 800;
  tiny_cap.max_backoff_ms = 300;
  EXPECT_EQ(RetryDelayMs(tiny_cap, 2), 300);
  // The policy survives its JSON round trip (it travels inside TaskScheduled).
  const TaskPolicy back = TaskPolicyFromJson(TaskPolicyToJson(p));
  EXPECT_EQ(back.backoff_ms, 1000);
  EXPECT_EQ(back.max_backoff_ms, 5000);
  EXPECT_EQ(back.max_attempts, p.max_attempts);
  EXPECT_EQ(back.lease_ms, p.lease_ms);
}

// Through Decide: a task whose policy allows many attempts gets delays
// backoff, 2x, 4x, ... up to the cap.
TEST(DecideResult, RetryDeadlinesFollowTheCappedBackoff) {
  // machine-check uses backoff 500 ms; rewrite its TaskScheduled policy to
  // allow many attempts with a cap, as a stored event would carry it.
  Driver run;
  run.Submit("machine-check", ProbeSpec(), 0);
  RunState s = run.state();
  TaskPolicy p;
  p.max_attempts = 10;
  p.backoff_ms = 1000;
  p.max_backoff_ms = 3000;
  s.tasks["r1.t1"].policy = p;
  const KindRegistry& kinds = TestKinds();
  std::vector<int64_t> delays;
  int64_t now = 10000;
  for (uint32_t attempt = 1; attempt <= 5; ++attempt) {
    Input in;
    in.type = Input::Type::kTaskResult;
    in.now_ms = now;
    in.task_id = "r1.t1";
    in.attempt = attempt;
    in.retryable = true;
    in.error_kind = "unreachable";
    auto r = Decide(kinds, s, in);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(Types(*r), (Strings{"TaskFailed", "TaskRetryScheduled"})) << attempt;
    const int64_t deadline = (*r)[1].payload["deadline_ms"];
    delays.push_back(deadline - now);
    uint64_t seq = s.last_seq;
    for (const auto& e : *r) Apply(kinds, s, e.type, e.payload, ++seq, now);
    Input fire;
    fire.type = Input::Type::kTimerFired;
    fire.now_ms = deadline;
    fire.timer_id = (*r)[1].payload["timer_id"];
    auto f = Decide(kinds, s, fire);
    ASSERT_TRUE(f.ok());
    for (const auto& e : *f) Apply(kinds, s, e.type, e.payload, ++seq, deadline);
    EXPECT_EQ(s.tasks["r1.t1"].attempt, attempt + 1);
    now = deadline + 100;
  }
  EXPECT_EQ(delays, (std::vector<int64_t>{1000, 2000, 3000, 3000, 3000}));
}

TEST(DecideResult, RetriesExhaustedFailTheRun) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  int64_t now = 2000;
  for (uint32_t attempt = 1; attempt <= 2; ++attempt) {
    auto evs = run.Report("r1.t1", attempt, false, now, true);
    ASSERT_EQ(Types(evs), (Strings{"TaskFailed", "TaskRetryScheduled"}));
    now = evs[1].payload["deadline_ms"].get<int64_t>();
    auto fired = run.Timer(evs[1].payload["timer_id"], now);
    ASSERT_EQ(Types(fired), (Strings{"TimerFired", "TaskRedispatched"}));
  }
  auto last = run.Report("r1.t1", 3, false, now + 10, true);
  EXPECT_EQ(Types(last), (Strings{"TaskFailed", "ProbeFailed", "StateChanged", "RunFinished"}));
  EXPECT_EQ(last[0].payload["final"], true);
  EXPECT_EQ(last[2].payload["to"], "failed");
  EXPECT_EQ(last[3].payload["status"], "failed");
  EXPECT_TRUE(run.state().terminal);
  EXPECT_EQ(run.state().status, RunStatus::kFailed);
  EXPECT_NE(run.state().error.find("unreachable"), std::string::npos) << run.state().error;
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kFailed);
  EXPECT_EQ(run.task("r1.t1").failures, 3);
  EXPECT_EQ(run.Summary()["probe_failure"]["error_kind"], "unreachable");
}

TEST(DecideResult, NonRetryableFailureFailsAtOnce) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto evs = run.Report("r1.t1", 1, false, 2000, /*retryable=*/false, json::object(), "npu_smi_missing");
  EXPECT_EQ(Types(evs), (Strings{"TaskFailed", "ProbeFailed", "StateChanged", "RunFinished"}));
  EXPECT_EQ(evs[0].payload["final"], true);
  EXPECT_EQ(run.state().status, RunStatus::kFailed);
  EXPECT_NE(run.state().error.find("npu_smi_missing"), std::string::npos);
  EXPECT_TRUE(run.state().timers.empty());
}

// ---------------------------------------------------------------- ignored results

void ExpectOnlyIgnored(const std::vector<NewEvent>& evs, const std::string& reason_part) {
  ASSERT_EQ(Types(evs), (Strings{"TaskResultIgnored"}));
  const std::string reason = evs[0].payload["reason"];
  EXPECT_NE(reason.find(reason_part), std::string::npos) << reason;
}

TEST(DecideIgnored, StaleAttemptIsIgnoredAndChangesNothing) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  run.WorkerLost("r1.t1", 1, 2000);  // attempt 2 is current now
  const json before = run.Summary();
  auto evs = run.Report("r1.t1", 1, true, 2100);
  ExpectOnlyIgnored(evs, "stale attempt");
  EXPECT_EQ(evs[0].payload["attempt"], 1);
  EXPECT_EQ(run.task("r1.t1").attempt, 2u);
  EXPECT_TRUE(run.task("r1.t1").in_flight());
  json after = run.Summary();
  EXPECT_EQ(after["state"], before["state"]);
  EXPECT_EQ(after["outstanding_tasks"], before["outstanding_tasks"]);
  EXPECT_EQ(after["status"], "running");
  // A stale failure is ignored as well (no retry scheduled).
  ExpectOnlyIgnored(run.Report("r1.t1", 1, false, 2200, true), "stale attempt");
  // The current attempt's result still counts.
  auto ok = run.Report("r1.t1", 2, true, 2300);
  EXPECT_EQ(ok.front().type, "TaskSucceeded");
  EXPECT_EQ(run.state().status, RunStatus::kOk);
}

TEST(DecideIgnored, DuplicateResultWhileTheRunGoesOnIsIgnored) {
  Driver run;
  run.Submit("two-task", json::object(), 1000);
  ASSERT_EQ(run.Report("r1.t1", 1, true, 2000).size(), 1u);  // TaskSucceeded only: b still running
  ExpectOnlyIgnored(run.Report("r1.t1", 1, true, 2001), "duplicate");
  ExpectOnlyIgnored(run.Report("r1.t1", 1, false, 2002, true), "duplicate");
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kSucceeded);
  EXPECT_FALSE(run.state().terminal);
  // Same for a failure result of a task waiting for its retry.
  auto f = run.Report("r1.t2", 1, false, 2100, true);
  ASSERT_EQ(Types(f), (Strings{"TaskFailed", "TaskRetryScheduled"}));
  ExpectOnlyIgnored(run.Report("r1.t2", 1, false, 2101, true), "duplicate");
  EXPECT_EQ(run.state().timers.size(), 1u);
}

TEST(DecideIgnored, ResultAfterTheRunFinishedIsDroppedWithoutAnEvent) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  run.Report("r1.t1", 1, true, 2000);
  const uint64_t seq = run.state().last_seq;
  EXPECT_TRUE(run.Report("r1.t1", 1, true, 2001).empty()) << "nothing follows RunFinished";
  EXPECT_EQ(run.state().last_seq, seq);
  EXPECT_EQ(run.state().status, RunStatus::kOk);
}

TEST(DecideIgnored, UnknownTaskIsIgnored) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto evs = run.Report("r1.t77", 1, true, 2000);
  ExpectOnlyIgnored(evs, "unknown task");
  EXPECT_EQ(evs[0].payload["task_id"], "r1.t77");
  EXPECT_EQ(evs[0].payload["worker"], "w1");
  EXPECT_TRUE(run.task("r1.t1").in_flight());
}

// ---------------------------------------------------------------- lost workers

TEST(DecideWorkerLost, RedispatchesThenFailsAfterMaxAttempts) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto l1 = run.WorkerLost("r1.t1", 1, 2000);
  ASSERT_EQ(Types(l1), (Strings{"TaskRedispatched"}));
  EXPECT_EQ(l1[0].payload["attempt"], 2);
  EXPECT_EQ(l1[0].payload["reason"], "worker_lost");
  EXPECT_EQ(l1[0].cause, "worker_lost:w1");
  // A report about an attempt that is not current changes nothing.
  EXPECT_TRUE(run.WorkerLost("r1.t1", 1, 2050).empty());
  auto l2 = run.WorkerLost("r1.t1", 2, 3000);
  ASSERT_EQ(Types(l2), (Strings{"TaskRedispatched"}));
  EXPECT_EQ(l2[0].payload["attempt"], 3);
  EXPECT_EQ(run.task("r1.t1").failures, 2);
  auto l3 = run.WorkerLost("r1.t1", 3, 4000);
  EXPECT_EQ(Types(l3), (Strings{"TaskFailed", "ProbeFailed", "StateChanged", "RunFinished"}));
  EXPECT_EQ(l3[0].payload["error_kind"], "worker_lost");
  EXPECT_EQ(l3[0].payload["final"], true);
  EXPECT_EQ(run.state().status, RunStatus::kFailed);
  EXPECT_TRUE(run.WorkerLost("r1.t1", 3, 5000).empty());
}

TEST(DecideWorkerLost, UnknownOrWaitingTaskIsNotRedispatched) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  EXPECT_TRUE(run.WorkerLost("r1.t9", 1, 1500).empty());
  run.Report("r1.t1", 1, false, 2000, true);  // retry_wait
  EXPECT_TRUE(run.WorkerLost("r1.t1", 1, 2100).empty());
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kRetryWait);
}

// ---------------------------------------------------------------- cancel

TEST(DecideCancel, AbandonsOutstandingWorkAndEndsCancelled) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto evs = run.Cancel(2000);
  EXPECT_EQ(Types(evs), (Strings{"CancelRequested", "TaskAbandoned", "StateChanged", "RunFinished"}));
  EXPECT_EQ(evs[0].payload["by"], "test");
  EXPECT_EQ(evs[1].payload["task_id"], "r1.t1");
  EXPECT_EQ(evs[2].payload["to"], "cancelled");
  EXPECT_EQ(evs[3].payload["status"], "cancelled");
  EXPECT_EQ(run.state().status, RunStatus::kCancelled);
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kAbandoned);
  // Late result of the abandoned task, a second cancel, a lost worker: nothing changes.
  EXPECT_TRUE(run.Report("r1.t1", 1, true, 2100).empty()) << "nothing follows RunFinished";
  EXPECT_TRUE(run.Cancel(2200).empty());
  EXPECT_TRUE(run.WorkerLost("r1.t1", 1, 2300).empty());
  EXPECT_EQ(run.state().status, RunStatus::kCancelled);
}

TEST(DecideCancel, CancelsTheArmedRetryTimer) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto f = run.Report("r1.t1", 1, false, 2000, true);
  const std::string timer = f[1].payload["timer_id"];
  auto evs = run.Cancel(2100);
  EXPECT_EQ(Types(evs),
            (Strings{"CancelRequested", "TaskAbandoned", "TimerCancelled", "StateChanged", "RunFinished"}));
  EXPECT_EQ(evs[2].payload["timer_id"], timer);
  EXPECT_FALSE(run.state().timers.at(timer).armed);
  EXPECT_TRUE(run.Timer(timer, 2600).empty());
}

// ---------------------------------------------------------------- recovery

TEST(DecideRecover, RedispatchesInFlightTasksOnly) {
  Driver run;
  run.Submit("two-task", json::object(), 1000);
  run.Report("r1.t1", 1, true, 2000);  // a done, b in flight
  auto evs = run.Recover(3000);
  ASSERT_EQ(Types(evs), (Strings{"RunRecovered", "TaskRedispatched"}));
  ASSERT_EQ(evs[0].payload["outstanding_tasks"].size(), 1u);
  EXPECT_EQ(evs[0].payload["outstanding_tasks"][0]["task_id"], "r1.t2");
  EXPECT_EQ(evs[1].payload["task_id"], "r1.t2");
  EXPECT_EQ(evs[1].payload["attempt"], 2);
  EXPECT_EQ(evs[1].payload["reason"], "recovery");
  EXPECT_EQ(evs[0].cause, "recovery");
  EXPECT_EQ(run.state().recoveries, 1);
  EXPECT_EQ(run.task("r1.t1").status, TaskStatus::kSucceeded);
  EXPECT_EQ(run.task("r1.t1").attempt, 1u);
  // Recovery is not a failure: the retry budget is untouched.
  EXPECT_EQ(run.task("r1.t2").failures, 0);
  // The result of the attempt that was running before the crash is stale now.
  ExpectOnlyIgnored(run.Report("r1.t2", 1, true, 3100), "stale attempt");
  auto ok = run.Report("r1.t2", 2, true, 3200);
  EXPECT_EQ(Types(ok), (Strings{"TaskSucceeded", "StateChanged", "RunFinished"}));
}

TEST(DecideRecover, ProbeInFlightIsRedispatchedAndCompletes) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto evs = run.Recover(5000);
  ASSERT_EQ(Types(evs), (Strings{"RunRecovered", "TaskRedispatched"}));
  EXPECT_EQ(run.task("r1.t1").attempt, 2u);
  EXPECT_EQ(run.Summary()["recoveries"], 1);
  run.Report("r1.t1", 2, true, 6000);
  EXPECT_EQ(run.state().status, RunStatus::kOk);
}

TEST(DecideRecover, RetryWaitingTaskKeepsItsTimerAndIsNotRedispatched) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto f = run.Report("r1.t1", 1, false, 2000, true);
  const std::string timer = f[1].payload["timer_id"];
  auto evs = run.Recover(2100);
  ASSERT_EQ(Types(evs), (Strings{"RunRecovered"}));
  EXPECT_TRUE(evs[0].payload["outstanding_tasks"].empty());
  ASSERT_EQ(evs[0].payload["armed_timers"].size(), 1u);
  EXPECT_EQ(evs[0].payload["armed_timers"][0]["timer_id"], timer);
  EXPECT_EQ(evs[0].payload["armed_timers"][0]["deadline_ms"], 2500);
  auto fired = run.Timer(timer, 2500);
  EXPECT_EQ(Types(fired), (Strings{"TimerFired", "TaskRedispatched"}));
}

TEST(DecideRecover, FinishedRunIsLeftAlone) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  run.Report("r1.t1", 1, true, 2000);
  EXPECT_TRUE(run.Recover(3000).empty());
  EXPECT_EQ(run.state().recoveries, 0);
}

// ---------------------------------------------------------------- signals

TEST(DecideSignal, ProbeRefusesSignalsAndRecordsNothing) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  for (const char* name : {"stop", ev::kSignalWatchedRunFinished, ""}) {
    Input in;
    in.type = Input::Type::kSignal;
    in.now_ms = 2000;
    in.signal = name;
    in.result = json{{"force", true}};
    auto r = run.TryStep(in);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("does not accept"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(run.state().last_seq, 3u);
  EXPECT_EQ(run.state().state, "probing");
}

TEST(DecideSignal, SignalToAFinishedRunIsANoOp) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  run.Cancel(1500);
  Input in;
  in.type = Input::Type::kSignal;
  in.now_ms = 2000;
  in.signal = "stop";
  auto r = run.TryStep(in);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

// ---------------------------------------------------------------- DecideWithState

// Every field of a RunState, for comparing two of them.
json Fingerprint(const RunState& s) {
  json tasks = json::object(), timers = json::object();
  for (const auto& [id, t] : s.tasks)
    tasks[id] = {t.kind,    t.attempt, t.failures, t.payload, TaskPolicyToJson(t.policy), TaskStatusName(t.status),
                 t.result};
  for (const auto& [id, t] : s.timers) timers[id] = {t.purpose, t.deadline_ms, t.payload, t.armed};
  return {s.run_id,     s.kind,        s.state,      RunStatusName(s.status), s.machine,          s.tag,
          s.error,      s.spec,        s.data,       tasks,         timers,             s.last_seq,
          s.last_hash,  s.created_ms,  s.updated_ms, s.finished_ms, s.terminal,         s.cancel_requested,
          s.recoveries, std::string(sm::LeasePhaseName(s.lease.phase)), s.watching,   s.next_task_no, s.next_timer_no,
          s.requested_children};
}

// The broker keeps DecideWithState's state instead of applying the events
// itself: it must be exactly what applying the events gives.
TEST(DecideWithState, StateIsWhatApplyingTheEventsGives) {
  Driver run;
  auto check = [&](const Input& in) {
    auto decided = DecideWithState(TestKinds(), run.state(), in);
    ASSERT_TRUE(decided.ok()) << decided.status().ToString();
    // Deciding on a moved-in state (as the broker does) gives the same.
    auto moved = DecideWithState(TestKinds(), RunState(run.state()), in);
    ASSERT_TRUE(moved.ok()) << moved.status().ToString();
    ASSERT_EQ(moved->events.size(), decided->events.size());
    for (size_t i = 0; i < moved->events.size(); ++i)
      EXPECT_EQ(moved->events[i].payload.dump(), decided->events[i].payload.dump()) << moved->events[i].type;
    EXPECT_EQ(Fingerprint(moved->state), Fingerprint(decided->state));
    // The events as the broker stages them (no seq or hash yet), applied
    // with ApplyStaged (how it rebuilds a run's state), give that state too.
    RunState staged = run.state();
    for (const auto& ne : decided->events) {
      proto::Event e;
      e.set_type(ne.type);
      e.set_time_ms(in.now_ms);
      e.set_payload_json(ne.payload.dump());
      ApplyStaged(TestKinds(), staged, e);
    }
    EXPECT_EQ(Fingerprint(staged), Fingerprint(decided->state));
    const auto evs = run.Step(in);
    EXPECT_EQ(Types(decided->events), Types(evs));
    EXPECT_EQ(Fingerprint(decided->state), Fingerprint(run.state()));
  };
  check(SubmitInput("probe", ProbeSpec(), 1000));
  check(ResultInput("r1.t1", 1, false, 1100, /*retryable=*/true));  // TaskFailed + TaskRetryScheduled
  ASSERT_EQ(run.state().timers.size(), 1u);
  check(TimerInput(run.state().timers.begin()->first, 2000));  // TimerFired + TaskRedispatched
  check(ResultInput("r1.t1", 2, true, 2100, false, json{{"npus", 0}}));  // TaskSucceeded, ProbeRecorded, StateChanged, RunFinished
  EXPECT_TRUE(run.state().terminal);
}

}  // namespace
}  // namespace npuprof::sm::testing
