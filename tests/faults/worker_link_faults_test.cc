// Worker and link faults during the long tasks of real runs, against the
// loopback sshd and the simulated target:
//   * the worker holding the task is SIGKILLed (by its pid) mid-task: the
//     broker notices the missed heartbeats, re-dispatches, and the new
//     attempt re-attaches to what the first one started on the target;
//   * the sshd child serving the worker's connection is SIGKILLed mid-task:
//     the task fails retryably (connection lost) and its retry re-attaches;
//   * the target is unreachable (sshd down) when the run starts and comes
//     back: retry with backoff, then the run goes on.
// Each ends with the run's normal result, `verify` passing, every remote
// effect that must happen once having happened once, nothing left running.
#include <signal.h>

#include <gtest/gtest.h>

#include "tests/faults/fault_test_util.h"

namespace npuprof::testing {
namespace {

struct LongTask {
  std::string name;       // test name part
  std::string fault;      // "worker" | "sshd_child"
  std::string run_kind;   // torch-profile | memory-profile
  std::string task_kind;  // the task to hit
  std::vector<std::string> sim_args;
  std::vector<std::string> submit_extra;
};

size_t CountLogins(const std::string& sshd_log) {
  size_t n = 0;
  for (size_t p = sshd_log.find("Accepted publickey"); p != std::string::npos;
       p = sshd_log.find("Accepted publickey", p + 1))
    ++n;
  return n;
}

void PrintTo(const LongTask& t, std::ostream* os) { *os << t.fault << " during " << t.task_kind; }

class LongTaskFault : public ::testing::TestWithParam<LongTask> {
 protected:
  void TearDown() override {
    if (HasFailure() && !run_.empty()) {
      CliResult ev = h_.Cli({"events", run_});
      std::cerr << "events of " << run_ << ":\n" << ev.out << ev.err << std::endl;
    }
    h_.Stop();
  }
  std::vector<std::string> SubmitArgs(const LongTask& t, const std::string& model) {
    std::vector<std::string> a;
    if (t.run_kind == "torch-profile")
      a = {"submit", "torch-profile", "--machine", "sim1", "--tag", "fault", "--model", model, "--served-model-name",
           "qwen", "--tp", "2", "--mode", "enforce_eager", "--request-kind", "text", "--prompt-tokens", "32",
           "--benchmark-total-requests", "4", "--benchmark-concurrency", "2", "--flush-seconds", "0",
           "--health-timeout", "60", "--profile-control-timeout", "30", "--request-timeout", "60"};
    else
      a = {"submit", "memory-profile", "--machine", "sim1", "--model", model, "--tp", "2", "--port",
           std::to_string(FreeLoopbackPort()), "--flush-seconds", "0", "--health-timeout", "60"};
    a.insert(a.end(), t.submit_extra.begin(), t.submit_extra.end());
    if (t.run_kind == "torch-profile" && t.submit_extra.empty()) a.insert(a.end(), {"--benchmark-output-tokens", "4"});
    return a;
  }

  NpuprofHarness h_;
  std::string run_;
};

TEST_P(LongTaskFault, RunEndsNormallyWithEffectsOnce) {
  const LongTask t = GetParam();
  std::vector<std::string> sim = {"--startup-delay", "0.2", "--export-delay", "0.2"};
  sim.insert(sim.end(), t.sim_args.begin(), t.sim_args.end());
  ASSERT_TRUE(h_.Start(sim, 2).ok());
  const std::string model = h_.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  CliResult sub = h_.Cli(SubmitArgs(t, model));
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  run_ = sub.json().value("run_id", "");
  ASSERT_FALSE(run_.empty()) << sub.out;

  // Wait until a worker holds the task, give the remote side a moment to
  // start, then hit it.
  std::string task;
  pid_t holder = -1;
  for (int i = 0; i < 600 && holder <= 0; ++i) {
    const json s = ShowRun(h_, run_);
    ASSERT_FALSE(Finished(s)) << "the run ended before " << t.task_kind << " ran: " << s.dump(2);
    task = OutstandingTask(s, t.task_kind);
    if (!task.empty()) holder = HolderOf(h_, task);
    if (holder <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(holder, 0) << "no worker took " << t.task_kind;
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ASSERT_EQ(OutstandingTask(ShowRun(h_, run_), t.task_kind), task) << "the task ended before the fault";
  size_t logins_before = 0;
  if (t.fault == "worker") {
    ASSERT_EQ(kill(holder, SIGKILL), 0);
  } else {
    ASSERT_FALSE(h_.sshd().ChildPids().empty());
    logins_before = CountLogins(h_.sshd().log());
    h_.sshd().KillChildren(SIGKILL);
  }

  const json s = WaitForRun(h_, run_, Finished, 240);
  ASSERT_TRUE(Finished(s)) << s.dump(2);
  EXPECT_EQ(s.value("status", ""), "ok") << s.dump(2);
  const json events = RunEvents(h_, run_);
  if (t.fault == "worker") {
    int lost = 0;
    for (const auto& e : events)
      if (e.value("type", "") == "TaskRedispatched" && e["payload"].value("task_id", "") == task &&
          e["payload"].value("reason", "") == "worker_lost")
        ++lost;
    EXPECT_GE(lost, 1) << "the lost worker's task was not re-dispatched";
  } else {
    // The worker's connection died under the task: the task either rebuilt
    // it itself (the pool reconnects on the next command) or failed
    // retryably and its retry did; either way a new login happened.
    EXPECT_GT(CountLogins(h_.sshd().log()), logins_before) << "no new SSH connection after the kill";
  }
  CliResult v = h_.Cli({"verify", run_});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(h_.SimTruthFiles().size(), 1u) << "vLLM launched once";
  if (t.run_kind == "torch-profile") {
    const auto analysed = h_.InvocationLogs(".sim_analyse_invocations");
    EXPECT_EQ(analysed.size(), 2u);
    for (const auto& [dir, n] : analysed) EXPECT_EQ(n, 1u) << "analyse() runs of " << dir;
  } else {
    const auto exported = h_.InvocationLogs(".sim_export_invocations");
    EXPECT_EQ(exported.size(), 1u);
    for (const auto& [dir, n] : exported) EXPECT_EQ(n, 1u) << "msprof exports of " << dir;
  }
  const std::vector<pid_t> left = h_.TargetProcessesAfter(5);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left on the target";
}

const std::vector<std::string> kLongWave = {"--benchmark-output-tokens", "40"};

INSTANTIATE_TEST_SUITE_P(
    Faults, LongTaskFault,
    ::testing::Values(
        LongTask{"worker_wave", "worker", "torch-profile", "torch_profile.requests", {"--token-delay", "0.05"}, kLongWave},
        LongTask{"worker_analyse", "worker", "torch-profile", "torch_profile.analyse_rank", {"--set", "delays.analyse=4"}, {}},
        LongTask{"worker_export", "worker", "memory-profile", "memory.export",
                 {"--export-delay", "4", "--set", "msprof_auto_export=false"}, {}},
        LongTask{"sshd_child_analyse", "sshd_child", "torch-profile", "torch_profile.analyse_rank",
                 {"--set", "delays.analyse=4"}, {}},
        LongTask{"sshd_child_export", "sshd_child", "memory-profile", "memory.export",
                 {"--export-delay", "4", "--set", "msprof_auto_export=false"}, {}}),
    [](const ::testing::TestParamInfo<LongTask>& i) { return i.param.name; });

// The worker's own fault injection (NPUPROF_FAULT_WORKER_ABORT_IN_TASK, read by
// workers started by this server): each worker SIGKILLs itself 800 ms into
// the first attempt of an analyse task; the re-dispatched attempts re-attach.
TEST(WorkerAbortFault, InjectedAbortMidAnalyseIsRecovered) {
  NpuprofHarness h;
  h.SetServerEnv({{"NPUPROF_FAULT_WORKER_ABORT_IN_TASK", "torch_profile.analyse_rank:800"}});
  ASSERT_TRUE(h.Start({"--startup-delay", "0.2", "--set", "delays.analyse=2"}, 2).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  const std::vector<pid_t> workers_before = h.WorkerPids();
  CliResult sub = h.Cli({"submit", "torch-profile", "--machine", "sim1", "--tag", "abort", "--model", model,
                         "--served-model-name", "qwen", "--tp", "2", "--mode", "enforce_eager", "--request-kind",
                         "text", "--benchmark-output-tokens", "4", "--prompt-tokens", "32",
                         "--benchmark-total-requests", "4", "--benchmark-concurrency", "2", "--flush-seconds", "0",
                         "--health-timeout", "60", "--wait"},
                        240);
  EXPECT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  const std::string run = sub.json().value("session_id", sub.json().value("run_id", ""));
  ASSERT_FALSE(run.empty()) << sub.out;
  const json events = RunEvents(h, run);
  int lost = 0;
  for (const auto& e : events)
    if (e.value("type", "") == "TaskRedispatched" && e["payload"].value("reason", "") == "worker_lost") ++lost;
  EXPECT_GE(lost, 1) << "no analyse attempt was lost to the injected abort";
  EXPECT_NE(h.WorkerPids(), workers_before) << "the aborted worker(s) were not replaced";
  const auto analysed = h.InvocationLogs(".sim_analyse_invocations");
  EXPECT_EQ(analysed.size(), 2u);
  for (const auto& [dir, n] : analysed) EXPECT_EQ(n, 1u) << "analyse() runs of " << dir;
  CliResult v = h.Cli({"verify", run});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  h.Stop();
}

// The target is down (sshd stopped) when the run starts; it comes back after
// the first failed attempt: the retry with backoff reaches it and the run
// goes on. (Down for longer than the retry budget: ProbeCli.UnreachableMachineFailsAfterRetries.)
TEST(TargetUnreachable, ComesBackWithinTheRetryBudget) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--startup-delay", "0.2"}, 2).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "2"});
  ASSERT_FALSE(model.empty());
  h.sshd().Stop();
  CliResult sub = h.Cli({"submit", "serve", "--machine", "sim1", "--model", model, "--tp", "1"});
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  const std::string run = sub.json().value("run_id", "");
  bool failed_once = false;
  for (int i = 0; i < 300 && !failed_once; ++i) {
    for (const auto& e : RunEvents(h, run))
      if (e.value("type", "") == "TaskFailed" && !e["payload"].value("final", true)) failed_once = true;
    if (!failed_once) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(failed_once) << "no retryable failure while the target was down";
  ASSERT_TRUE(h.sshd().Relaunch().ok());
  json s = WaitForRun(h, run, [](const json& j) { return j.value("state", "") == "ready" || Finished(j); }, 120);
  ASSERT_EQ(s.value("state", ""), "ready") << s.dump(2);
  const json events = RunEvents(h, run);
  EXPECT_GE(CountEvents(events, "TaskRetryScheduled"), 1);
  CliResult stop = h.Cli({"stop", run, "--wait"});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  EXPECT_EQ(ShowRun(h, run).value("status", ""), "ok");
  EXPECT_TRUE(h.LiveServicePids().empty());
  CliResult v = h.Cli({"verify", run});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  h.Stop();
}

}  // namespace
}  // namespace npuprof::testing
