// Pure tests of the serve run kind: the transition table (illegal moves are
// rejected) and the decisions on every path (ready, stop, cancel, failures).
#include <gtest/gtest.h>

#include "tests/support/lease_inputs.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/launch_audit.h"
#include "statemachine/serve_argv.h"
#include "statemachine/serve_machine.h"
#include "statemachine/service_spec.h"
#include "statemachine/task_payload.h"

namespace npuprof::sm {
namespace {

json Spec() {
  return json{{"machine", "m1"},
              {"machine_record", {{"name", "m1"}, {"host", "h"}, {"user", "u"}, {"runtime_base", "/rt/"}}},
              {"model", "/models/qwen"},
              {"served_model_name", "qwen"},
              {"tp", 2},
              {"extra_args", {"--enforce-eager"}}};
}

// Drives one run through Decide/Apply like the broker does.
struct ServeRun {
  KindRegistry reg;
  RunState s;
  std::vector<NewEvent> all;
  int64_t now = 1'000'000;
  ServeRun() {
    reg.Register(std::make_unique<ServeMachine>());
    s.run_id = "r1";
  }
  Result<std::vector<NewEvent>> Try(Input in) {
    in.now_ms = (now += 10);
    auto r = Decide(reg, s, in);
    if (r.ok())
      for (const auto& e : *r) {
        Apply(reg, s, e.type, e.payload, s.last_seq + 1, now);
        all.push_back(e);
      }
    return r;
  }
  std::vector<NewEvent> Do(Input in) {
    auto r = Try(std::move(in));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<NewEvent>{};
  }
  void Submit(json spec = Spec()) {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = "serve";
    in.spec = std::move(spec);
    Do(in);
    while (auto lease = npuprof::sm::testing::NextLeaseInput(s)) Do(*lease);
  }
  const TaskInfo* Pending(const std::string& kind) const {
    for (const auto& [id, t] : s.tasks)
      if (t.kind == kind && t.in_flight()) return &t;
    return nullptr;
  }
  void Answer(const std::string& kind, bool ok, json result, const std::string& error_kind = "",
              bool retryable = false) {
    const TaskInfo* t = Pending(kind);
    ASSERT_NE(t, nullptr) << "no pending " << kind << " in state " << s.state;
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = ok;
    in.retryable = retryable;
    in.error_kind = error_kind;
    in.error = ok ? "" : "boom";
    in.result = std::move(result);
    Do(in);
  }
  void Signal(bool force) {
    Input in;
    in.type = Input::Type::kSignal;
    in.signal = "stop";
    in.result = {{"force", force}};
    Do(in);
  }
  void Cancel() {
    Input in;
    in.type = Input::Type::kCancel;
    Do(in);
  }
  // Fires every armed timer (as the broker would once due).
  void FireTimers() {
    std::vector<std::string> ids;
    for (const auto& [id, t] : s.timers)
      if (t.armed) ids.push_back(id);
    for (const auto& id : ids) {
      Input in;
      in.type = Input::Type::kTimerFired;
      in.timer_id = id;
      Do(in);
    }
  }
  json Summary() const { return reg.Find("serve")->Summary(s); }
};

json LaunchResult() {
  return {{"runtime_dir", "/rt/r1/service-1"}, {"pid", 4242}, {"port", 18000}, {"devices", {2, 3}},
          {"serve_argv", {"vllm", "serve", "/models/qwen"}}, {"stdout_log", "/rt/r1/service-1/stdout.log"},
          {"stderr_log", "/rt/r1/service-1/stderr.log"}, {"adopted", false}};
}

// What verify checks of a launched service (statemachine/launch_audit.h):
// the argv read back from the launch record gives every managed flag the
// spec's value, and the service ran on the leased devices.
TEST(ServeLaunchAudit, TheArgvThatRanIsJudgedAgainstTheSpec) {
  const auto launched = [](std::vector<std::string> extra_ran, json devices) {
    ServeRun r;
    r.Submit();
    const TaskInfo* launch = r.Pending(kServiceLaunchTask);
    EXPECT_NE(launch, nullptr);
    if (!launch) return std::vector<std::string>{"no launch"};
    std::vector<std::string> argv = BuildServeArgv(ServeArgvFieldsOf(PayloadOf<tasks::ServiceLaunch>(*launch), 18000));
    argv.insert(argv.end(), extra_ran.begin(), extra_ran.end());
    json result = LaunchResult();
    result["serve_argv"] = argv;
    result["devices"] = devices;
    r.Answer(kServiceLaunchTask, true, result);
    return LaunchDisagreements(*r.reg.Find("serve"), r.s);
  };
  EXPECT_TRUE(launched({}, {0, 1}).empty()) << "what the spec asked for ran";
  EXPECT_TRUE(launched({"--max-model-len", "4096"}, {0, 1}).empty()) << "serve does not manage it";
  auto port = launched({"--port", "1"}, {0, 1});
  ASSERT_EQ(port.size(), 1u);
  EXPECT_EQ(port[0], "r1.t2 (/rt/r1/service-1/launch.json): --port: ran 18000 then 1, the spec gives 18000");
  auto tp = launched({"-tp=1", "--data-parallel-size-local", "1"}, {0, 1});
  ASSERT_EQ(tp.size(), 2u);
  EXPECT_NE(tp[0].find("--tensor-parallel-size: ran 2 then 1, the spec gives 2"), std::string::npos) << tp[0];
  EXPECT_NE(tp[1].find("--data-parallel-size-local: ran 1, the spec gives nothing"), std::string::npos) << tp[1];
  auto devices = launched({}, {2, 3});
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_NE(devices[0].find("the service ran on devices [2,3], the run leased [0,1]"), std::string::npos)
      << devices[0];
}

TEST(ServeTable, IllegalMovesAreRejected) {
  ServeMachine m;
  const auto& t = m.transitions();
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"queued", "ready"}, {"launching", "ready"}, {"launching", "completed"}, {"waiting_ready", "completed"},
           {"ready", "completed"}, {"ready", "failed"}, {"ready", "launching"}, {"completed", "stopping"},
           {"failed", "stopping"}, {"cancelled", "ready"}, {"stopping", "launching"}, {"waiting_ready", "launching"}})
    EXPECT_FALSE(t.Allowed(from, to)) << from << " -> " << to;
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"queued", "launching"}, {"launching", "waiting_ready"}, {"waiting_ready", "ready"}, {"ready", "stopping"},
           {"stopping", "completed"}, {"stopping", "failed"}, {"stopping", "cancelled"}, {"launching", "failed"}})
    EXPECT_TRUE(t.Allowed(from, to)) << from << " -> " << to;
  for (const char* s : {"completed", "failed", "cancelled"}) EXPECT_TRUE(t.IsTerminal(s));
  EXPECT_FALSE(t.IsTerminal("ready"));
}

TEST(ServeTable, DecisionRefusesAnIllegalTransition) {
  ServeMachine m;
  RunState s;
  s.state = "ready";
  Decision d(m, s, 0, "test");
  d.Transition("completed");
  EXPECT_TRUE(d.failed());
  EXPECT_EQ(d.state().state, "ready");
}

TEST(ServeMachine, StartReadyStop) {
  ServeRun r;
  r.Submit();
  EXPECT_EQ(r.s.state, "launching");
  const TaskInfo* launch = r.Pending(kServiceLaunchTask);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->payload["runtime_dir"], "/rt/r1/service-1");
  // devices: null in the spec = any two free ones; the lease picked 0,1.
  EXPECT_EQ(launch->payload["devices"], json({0, 1}));
  EXPECT_EQ(r.Summary()["devices_lease"]["phase"], "held");
  EXPECT_EQ(launch->payload["extra_args"], json({"--enforce-eager"}));

  r.Answer(kServiceLaunchTask, true, LaunchResult());
  EXPECT_EQ(r.s.state, "waiting_ready");
  EXPECT_EQ(r.Summary()["service"]["status"], "starting");
  EXPECT_EQ(r.Summary()["service"]["pid"], 4242);
  const TaskInfo* wait = r.Pending(kServiceWaitReadyTask);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->payload["served_model_name"], "qwen");
  EXPECT_EQ(wait->payload["deadline_ms"], r.now + 300 * 1000);

  r.Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}, {"models", {"qwen"}}});
  EXPECT_EQ(r.s.state, "ready");
  json sum = r.Summary();
  EXPECT_EQ(sum["service"]["status"], "ready");
  EXPECT_EQ(sum["service"]["devices"], json({2, 3}));
  EXPECT_EQ(sum["service"]["port"], 18000);
  EXPECT_EQ(sum["armed_timers"].size(), 0u);  // the health timer was cancelled

  r.Signal(false);
  EXPECT_EQ(r.s.state, "stopping");
  const TaskInfo* stop = r.Pending(kServiceStopTask);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->payload["pid"], 4242);
  EXPECT_EQ(stop->payload["force"], false);
  EXPECT_EQ(stop->payload["runtime_dir"], "/rt/r1/service-1");

  r.Answer(kServiceStopTask, true, {{"stopped", true}, {"signals", {"SIGINT"}}});
  EXPECT_EQ(r.s.state, "completed");
  EXPECT_EQ(r.s.status, RunStatus::kOk);
  EXPECT_EQ(r.Summary()["service"]["status"], "stopped");
}

TEST(ServeMachine, ReadyServiceIsWatchedAndItsDeathFailsTheRun) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  r.Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}});
  ASSERT_EQ(r.s.state, "ready");
  const TaskInfo* watch = r.Pending(kServiceWatchTask);
  ASSERT_NE(watch, nullptr);
  EXPECT_EQ(watch->payload["pid"], 4242);
  EXPECT_EQ(watch->payload["poll_s"], 10);
  // The target unreachable for the watch's whole budget: watch again later, the run stays ready.
  r.Answer(kServiceWatchTask, false, json::object(), "unreachable", false);
  EXPECT_EQ(r.s.state, "ready");
  EXPECT_EQ(r.Pending(kServiceWatchTask), nullptr);
  ASSERT_EQ(r.Summary()["armed_timers"].size(), 1u);
  EXPECT_EQ(r.Summary()["armed_timers"][0]["purpose"], "watch_again");
  r.FireTimers();
  ASSERT_NE(r.Pending(kServiceWatchTask), nullptr);
  // Death while ready: failure recorded, what is left stopped by force, run failed.
  r.Answer(kServiceWatchTask, false, {{"stderr_tail", "Segmentation fault"}}, "service_died", false);
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_EQ(r.Summary()["failure"]["stage"], "watch");
  const TaskInfo* stop = r.Pending(kServiceStopTask);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->payload["force"], true);
  r.Answer(kServiceStopTask, true, {{"stopped", true}, {"already_gone", true}});
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kReleased);
}

TEST(ServeMachine, StopWhileWatchedAbandonsTheWatch) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  r.Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}});
  ASSERT_NE(r.Pending(kServiceWatchTask), nullptr);
  r.Signal(false);
  EXPECT_EQ(r.Pending(kServiceWatchTask), nullptr);
  EXPECT_NE(r.Pending(kServiceStopTask), nullptr);
}

TEST(ServeMachine, ReplayGivesTheSameSummary) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  r.Answer(kServiceWaitReadyTask, true, {{"ready_after_ms", 900}});
  r.Signal(true);
  r.Answer(kServiceStopTask, true, {{"stopped", true}});
  RunState again;
  again.run_id = "r1";
  int64_t seq = 0;
  for (const auto& e : r.all) Apply(r.reg, again, e.type, e.payload, ++seq, 0);
  EXPECT_EQ(again.data, r.s.data);
  EXPECT_EQ(again.state, r.s.state);
}

TEST(ServeMachine, StopDuringLaunchWaitsForThePid) {
  ServeRun r;
  r.Submit();
  r.Signal(false);
  EXPECT_EQ(r.s.state, "launching");  // the launch is not abandoned
  EXPECT_NE(r.Pending(kServiceLaunchTask), nullptr);
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_EQ(r.Pending(kServiceWaitReadyTask), nullptr);
  EXPECT_EQ(r.Pending(kServiceStopTask)->payload["pid"], 4242);
  r.Answer(kServiceStopTask, true, {{"stopped", true}});
  EXPECT_EQ(r.s.status, RunStatus::kOk);
}

TEST(ServeMachine, CancelStopsTheServiceForcefully) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  r.Answer(kServiceWaitReadyTask, true, json::object());
  r.Cancel();
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_EQ(r.Pending(kServiceStopTask)->payload["force"], true);
  r.Answer(kServiceStopTask, true, {{"stopped", true}});
  EXPECT_EQ(r.s.state, "cancelled");
  EXPECT_EQ(r.s.status, RunStatus::kCancelled);
}

TEST(ServeMachine, EarlyDeathFailsAndStillCleansUp) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  r.Answer(kServiceWaitReadyTask, false,
           {{"stderr_tail", "ModuleNotFoundError: No module named 'vllm_ascend'"}, {"env_hint", "install vllm-ascend"}},
           "environment");
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_EQ(r.Pending(kServiceStopTask)->payload["force"], true);
  EXPECT_EQ(r.Summary()["service"]["status"], "failed");
  r.Answer(kServiceStopTask, true, {{"stopped", true}, {"already_gone", true}});
  EXPECT_EQ(r.s.state, "failed");
  EXPECT_NE(r.s.error.find("environment"), std::string::npos) << r.s.error;
  EXPECT_NE(r.s.error.find("install vllm-ascend"), std::string::npos) << r.s.error;
  EXPECT_EQ(r.Summary()["failure"]["stderr_tail"], "ModuleNotFoundError: No module named 'vllm_ascend'");
}

TEST(ServeMachine, RefusedLaunchFailsWithoutCleanup) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, false, {{"started", false}, {"free_devices", {0}}}, "devices_unavailable");
  EXPECT_EQ(r.s.state, "failed");
  EXPECT_EQ(r.Pending(kServiceStopTask), nullptr);
  EXPECT_EQ(r.Summary()["failure"]["free_devices"], json({0}));
  EXPECT_NE(r.s.error.find("devices_unavailable"), std::string::npos) << r.s.error;
  EXPECT_NE(r.s.error.find("the service was never launched"), std::string::npos) << r.s.error;
}

TEST(ServeMachine, LaunchThatNeverHappenedIsNotStopped) {
  // e.g. a target without SFTP or an untrusted runtime dir: the launch failed before its start command.
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, false, {{"started", false}}, "channel_failed");
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  for (const auto& [id, t] : r.s.tasks) EXPECT_NE(t.kind, kServiceStopTask);
  EXPECT_NE(r.s.error.find("the service was never launched"), std::string::npos) << r.s.error;
  EXPECT_EQ(r.s.error.find("may still be running"), std::string::npos) << r.s.error;
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kReleased);
}

TEST(ServeMachine, LaunchThatMayHaveStartedIsCleanedUp) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, false, nullptr, "launch_lost");
  EXPECT_EQ(r.s.state, "stopping");
  const TaskInfo* stop = r.Pending(kServiceStopTask);
  EXPECT_FALSE(stop->payload.contains("pid"));  // the handler reads <runtime>/pid
  EXPECT_EQ(stop->payload["runtime_dir"], "/rt/r1/service-1");
  // The stop finds no start marker: the run says so instead of "may still be running".
  r.Answer(kServiceStopTask, true, {{"stopped", true}, {"already_gone", true}, {"never_started", true}});
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("launch_lost"), std::string::npos) << r.s.error;
  EXPECT_NE(r.s.error.find("the service was never launched"), std::string::npos) << r.s.error;
}

TEST(ServeMachine, AStopThatFailsWithoutAPidNamesTheRuntimeDir) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, false, nullptr, "launch_lost");
  r.Answer(kServiceStopTask, false, json::object(), "unreachable");
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("a service in /rt/r1/service-1 (pid unknown) may still be running"), std::string::npos)
      << r.s.error;
}

TEST(ServeMachine, HealthDeadlineTimerFailsAStuckWait) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  std::string timer;
  for (const auto& [id, t] : r.s.timers)
    if (t.armed) timer = id;
  ASSERT_FALSE(timer.empty());
  Input in;
  in.type = Input::Type::kTimerFired;
  in.timer_id = timer;
  r.Do(in);
  EXPECT_EQ(r.s.state, "stopping");
  for (const auto& [id, t] : r.s.tasks)
    if (t.kind == kServiceWaitReadyTask) {
      EXPECT_EQ(t.status, TaskStatus::kAbandoned);
    }
  EXPECT_EQ(r.Summary()["failure"]["kind"], "never_ready");
}

TEST(ServeMachine, StopWithoutForceThatFailsKeepsTheRunAndForceWorks) {
  ServeRun r;
  r.Submit();
  r.Answer(kServiceLaunchTask, true, LaunchResult());
  r.Answer(kServiceWaitReadyTask, true, json::object());
  r.Signal(false);
  r.Answer(kServiceStopTask, false, {{"stopped", false}}, "still_running");
  EXPECT_EQ(r.s.state, "ready");
  EXPECT_EQ(r.Summary()["service"]["status"], "ready");
  r.Signal(true);
  EXPECT_EQ(r.Pending(kServiceStopTask)->payload["force"], true);
  r.Answer(kServiceStopTask, true, {{"stopped", true}});
  EXPECT_EQ(r.s.status, RunStatus::kOk);
}

TEST(ServeMachine, UnknownSignalAndBadSpecAreRefused) {
  ServeRun r;
  json bad = Spec();
  bad["tp"] = 0;
  Input in;
  in.type = Input::Type::kSubmit;
  in.kind = "serve";
  in.spec = bad;
  EXPECT_FALSE(r.Try(in).ok());
  r.Submit();
  Input sig;
  sig.type = Input::Type::kSignal;
  sig.signal = "pause";
  EXPECT_FALSE(r.Try(sig).ok());
}

}  // namespace
}  // namespace npuprof::sm
