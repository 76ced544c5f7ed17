// The serve run kind end to end: `npuprof server` + local workers, a real
// loopback sshd and the simulated Ascend target (tests/sim). Each test has its
// own harness (temp dir, sshd, target, server), stopped and removed at the end.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <cstdlib>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

bool ProcessAlive(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto p = s.rfind(')');
  return p != std::string::npos && p + 2 < s.size() && s[p + 2] != 'Z';
}

class ServeE2E : public ::testing::Test {
 protected:
  void StartHarness(const std::vector<std::string>& sim_args = {}) {
    Status st = h_.Start(sim_args);
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (HasFailure() && !last_run_.empty()) {
      CliResult ev = h_.Cli({"events", last_run_});
      std::cerr << "events of " << last_run_ << ":\n" << ev.out << ev.err << std::endl;
    }
    h_.Stop();
  }
  CliResult Serve(std::vector<std::string> args, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {"submit", "serve", "--machine", "sim1", "--model", model_};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!extra.empty()) {
      argv.push_back("--");
      argv.insert(argv.end(), extra.begin(), extra.end());
    }
    CliResult r = h_.Cli(argv);
    json j = r.json();
    if (j.is_object() && j.contains("run_id")) last_run_ = j.value("run_id", "");
    return r;
  }
  json Show(const std::string& run) { return h_.Cli({"show", run}).json(); }
  // Polls `show` until pred holds (or timeout); returns the last summary.
  template <typename Pred>
  json WaitFor(const std::string& run, Pred pred, int timeout_s = 90) {
    json s;
    for (int i = 0; i < timeout_s * 5; ++i) {
      s = Show(run);
      if (pred(s)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  // others_may_start: a queued run may take the released NPUs and launch its
  // own service at once, so only this run's service is checked.
  void StopAndExpectGone(const std::string& run, pid_t pid, bool force = false,
                         bool others_may_start = false) {
    std::vector<std::string> args = {"stop", run, "--wait"};
    if (force) args.push_back("--force");
    CliResult stop = h_.Cli(args);
    EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
    json s = Show(run);
    EXPECT_EQ(s.value("status", ""), "ok") << s.dump(2);
    EXPECT_EQ(s.value("state", ""), "completed");
    EXPECT_EQ(s["service"].value("status", ""), "stopped");
    if (!others_may_start) {
      EXPECT_TRUE(h_.LiveServicePids().empty());
    }
    EXPECT_FALSE(ProcessAlive(pid));
  }

  NpuprofHarness h_;
  std::string model_;
  std::string last_run_;
};

TEST_F(ServeE2E, StartReadyStop) {
  StartHarness();
  CliResult r = Serve({"--served-model-name", "m", "--tp", "2", "--env", "MY_FLAG=a b", "--health-timeout", "60",
                       "--wait"},
                      {"--max-model-len", "2048", "--enforce-eager"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json s = r.json();
  ASSERT_EQ(s.value("state", ""), "ready") << s.dump(2);
  const json svc = s["service"];
  EXPECT_EQ(svc.value("status", ""), "ready");
  EXPECT_EQ(svc["devices"], json({0, 1}));
  EXPECT_EQ(svc["tp"], 2);
  EXPECT_EQ(svc["env"]["MY_FLAG"], "a b");
  EXPECT_EQ(svc.value("runtime_dir", "").rfind(h_.Dir() + "/runtime/" + last_run_ + "/service-1", 0), 0u);
  const std::vector<std::string> argv = svc["serve_argv"];
  for (const char* want : {"--served-model-name", "m", "--tensor-parallel-size", "2", "--max-model-len", "2048",
                           "--enforce-eager", "--host", "127.0.0.1"})
    EXPECT_NE(std::find(argv.begin(), argv.end(), want), argv.end()) << want;
  EXPECT_EQ(argv[0], "vllm");
  EXPECT_EQ(argv[2], model_);
  const pid_t pid = svc["pid"];
  auto live = h_.LiveServicePids();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0], pid);
  // The service must not inherit SIGINT/SIGQUIT ignored (a background job of
  // a non-interactive shell would): SigIgn bits 2 and 3 (mask 0x6) clear.
  {
    std::ifstream st("/proc/" + std::to_string(pid) + "/status");
    std::string line, sigign;
    while (std::getline(st, line))
      if (line.rfind("SigIgn:", 0) == 0) sigign = line.substr(7);
    ASSERT_FALSE(sigign.empty());
    const unsigned long long mask = std::stoull(sigign, nullptr, 16);
    EXPECT_EQ(mask & 0x6ULL, 0ULL) << "SigIgn of the service: " << sigign;
  }
  // The simulator's own record of what it was asked to run.
  bool found = false;
  for (const auto& t : h_.SimTruthFiles())
    if (t.value("main_pid", 0) == pid) {
      found = true;
      EXPECT_EQ(t["served_model_name"], "m");
      EXPECT_EQ(t["tp"], 2);
      EXPECT_EQ(t["port"], svc["port"]);
      EXPECT_EQ(t["max_model_len"], 2048);
      EXPECT_EQ(t["enforce_eager"], true);
    }
  EXPECT_TRUE(found);
  StopAndExpectGone(last_run_, pid);
}

// The result of the run's service.wait_ready task, from its events.
json WaitReadyResult(NpuprofHarness& h, const std::string& run) {
  std::string task;
  for (const auto& e : h.Cli({"events", run, "--json"}).json().value("events", json::array())) {
    const json& p = e["payload"];
    if (e.value("type", "") == "TaskScheduled" && p.value("kind", "") == "service.wait_ready")
      task = p.value("task_id", "");
    if (e.value("type", "") == "TaskSucceeded" && !task.empty() && p.value("task_id", "") == task) return p["result"];
  }
  return json();
}

// The three ways readiness is seen: the start-up line makes the probe look at
// once; a service that prints no such line (uvicorn at warning) is found by
// the probes alone; a line that comes before the port answers is not taken
// for readiness, and the probes go on until HTTP agrees.
TEST_F(ServeE2E, ReadinessIsSeenFromTheStartUpLineOrByProbing) {
  StartHarness();
  CliResult r = Serve({"--served-model-name", "m", "--health-timeout", "60", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json w = WaitReadyResult(h_, last_run_);
  // The wait on the target watches the start-up line and the port's
  // listener at once: the simulated service opens its port as it writes the
  // line, so either hint may come first (a fresh-clone CI saw "probe" once).
  const std::string seen = w.value("seen_by", "");
  EXPECT_TRUE(seen == "log" || seen == "probe") << w.dump();
  StopAndExpectGone(last_run_, r.json()["service"].value("pid", 0));

  r = Serve({"--served-model-name", "m", "--health-timeout", "60", "--wait"}, {"--uvicorn-log-level", "warning"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.json().value("state", ""), "ready");
  w = WaitReadyResult(h_, last_run_);
  // No start-up line: the port's listener was the hint, and HTTP was asked
  // only once it was there (the wait runs on the target: no probe without a hint).
  EXPECT_EQ(w.value("seen_by", ""), "probe") << w.dump();
  EXPECT_GE(w.value("rounds", 0), 1) << w.dump();
  StopAndExpectGone(last_run_, r.json()["service"].value("pid", 0));
}

TEST_F(ServeE2E, AStartUpLineBeforeThePortAnswersIsNotReadiness) {
  StartHarness({"--fault", "ready_line_early=1.5"});
  CliResult r = Serve({"--served-model-name", "m", "--health-timeout", "60", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.json().value("state", ""), "ready");
  json w = WaitReadyResult(h_, last_run_);
  EXPECT_EQ(w.value("seen_by", ""), "probe") << w.dump();
  // The line's probe failed, then at least one more (how many fit in the
  // 1.5 s before the port answers depends on the load and the link).
  EXPECT_GE(w.value("rounds", 0), 2) << w.dump();
  StopAndExpectGone(last_run_, r.json()["service"].value("pid", 0));
}

TEST_F(ServeE2E, NeverReadyFailsWithDiagnosticsAndStopsTheService) {
  StartHarness({"--fault", "never_ready"});
  CliResult r = Serve({"--served-model-name", "m", "--health-timeout", "3", "--stop-grace", "3", "--wait"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  if (std::getenv("SERVE_TEST_VERBOSE")) std::cerr << r.err << std::endl;
  json s = WaitFor(last_run_, [](const json& j) { return j.value("status", "running") != "running"; });
  EXPECT_EQ(s.value("status", ""), "failed") << s.dump(2);
  EXPECT_EQ(s["failure"].value("kind", ""), "never_ready");
  EXPECT_NE(s["failure"].value("stdout_tail", "").find("init engine"), std::string::npos) << s["failure"].dump(2);
  EXPECT_NE(s.value("error", "").find("not ready within 3 s"), std::string::npos) << s.value("error", "");
  EXPECT_EQ(s["service"]["stop_result"].value("stopped", false), true);
  EXPECT_TRUE(h_.LiveServicePids().empty());
  EXPECT_FALSE(ProcessAlive(s["service"].value("pid", 0)));
}

TEST_F(ServeE2E, EarlyCrashFailsFastWithStderrTailAndEnvHint) {
  StartHarness({"--fault", "crash_on_start"});
  CliResult r = Serve({"--health-timeout", "150", "--wait"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("vllm_ascend"), std::string::npos) << r.err;
  if (std::getenv("SERVE_TEST_VERBOSE")) std::cerr << r.err << std::endl;
  json s = Show(last_run_);
  EXPECT_EQ(s.value("status", ""), "failed") << s.dump(2);
  EXPECT_EQ(s["failure"].value("kind", ""), "environment");
  EXPECT_NE(s["failure"].value("stderr_tail", "").find("No module named 'vllm_ascend'"), std::string::npos);
  EXPECT_FALSE(s["failure"].value("env_hint", "").empty());
  EXPECT_NE(s.value("error", "").find(s["failure"].value("env_hint", "-")), std::string::npos);
  EXPECT_TRUE(h_.LiveServicePids().empty());
}

TEST_F(ServeE2E, FreeDevicesAreChosenQueuedBehindALeaseAndTooFewIsRefused) {
  StartHarness({"--devices", "4", "--busy", "0:proc", "--busy", "2:hbm"});
  CliResult r = Serve({"--tp", "2", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json s = r.json();
  EXPECT_EQ(s["service"]["devices"], json({1, 3}));
  EXPECT_EQ(s["devices_lease"]["phase"], "held");
  const std::string first = last_run_;

  // 0 and 2 are busy with other processes, 1 and 3 leased to the first run:
  // a one-NPU run waits queued for the lease, and says so in `runs`.
  CliResult q = Serve({});
  ASSERT_EQ(q.exit_code, 0) << q.out << q.err;
  const std::string second = last_run_;
  json waiting;
  for (int i = 0; i < 100 && waiting.is_null(); ++i) {
    json runs = h_.Cli({"runs", "--json"}).json();
    if (runs.is_object())
      for (const auto& row : runs["runs"])
        if (row.value("run_id", "") == second && row.contains("waiting_for")) waiting = row["waiting_for"];
    if (waiting.is_null()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(waiting.is_null()) << "the second run never showed what it waits for";
  EXPECT_EQ(waiting.value("count", 0), 1);
  EXPECT_NE(waiting.value("reason", "").find(first), std::string::npos) << waiting.dump();
  EXPECT_EQ(Show(second).value("state", ""), "queued");
  CliResult table = h_.Cli({"runs"});
  EXPECT_NE(table.out.find("waiting for 1 device(s) on sim1"), std::string::npos) << table.out;

  // Three NPUs can never be had here: refused at once, nothing started.
  CliResult refused = Serve({"--tp", "3", "--wait"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  json f = Show(last_run_);
  EXPECT_EQ(f.value("status", ""), "failed");
  const std::string err = f.value("error", "");
  EXPECT_NE(err.find("devices_unavailable: needs 3 free NPU(s) on sim1"), std::string::npos) << err;
  EXPECT_NE(err.find("busy with other processes: [0,2]"), std::string::npos) << err;
  EXPECT_EQ(f["service"], nullptr);

  // The first run's stop releases its devices: the queued run starts on one.
  StopAndExpectGone(first, s["service"].value("pid", 0), /*force=*/false, /*others_may_start=*/true);
  json ready = WaitFor(second, [](const json& j) {
    return j.value("state", "") == "ready" || j.value("status", "running") != "running";
  });
  ASSERT_EQ(ready.value("state", ""), "ready") << ready.dump(2);
  EXPECT_EQ(ready["service"]["devices"], json({1}));
  StopAndExpectGone(second, ready["service"].value("pid", 0));
  CliResult v = h_.Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(v.json()["lease_audit"].value("ok", false), true) << v.out;
}

TEST_F(ServeE2E, DeathWhileReadyFailsTheRunAndHandsTheNpusToTheNextRun) {
  StartHarness();
  CliResult r = Serve({"--tp", "2", "--devices", "0,1", "--watch-poll", "1", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json first = r.json();
  const std::string first_run = last_run_;
  const pid_t pid = first["service"].value("pid", 0);
  ASSERT_GT(pid, 0);
  // A second service on the same NPUs queues behind the first.
  CliResult q = Serve({"--tp", "2", "--devices", "0,1"});
  ASSERT_EQ(q.exit_code, 0) << q.out << q.err;
  const std::string second = last_run_;
  EXPECT_EQ(Show(second).value("state", ""), "queued");

  ASSERT_EQ(kill(-pid, SIGKILL), 0);  // the whole service process group dies under the ready run
  json f = WaitFor(first_run, [](const json& j) { return j.value("status", "running") != "running"; }, 60);
  EXPECT_EQ(f.value("status", ""), "failed") << f.dump(2);
  EXPECT_EQ(f["failure"].value("stage", ""), "watch") << f.dump(2);
  EXPECT_EQ(f["failure"].value("kind", ""), "service_died");
  EXPECT_EQ(f["devices_lease"].value("phase", ""), "released");

  json s = WaitFor(second, [](const json& j) {
    return j.value("state", "") == "ready" || j.value("status", "running") != "running";
  });
  ASSERT_EQ(s.value("state", ""), "ready") << s.dump(2);
  StopAndExpectGone(second, s["service"].value("pid", 0));
  CliResult v = h_.Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST_F(ServeE2E, LaunchIsAdoptedAfterTheWorkerIsKilledMidLaunch) {
  ::setenv("NPUPROF_FAULT_SERVICE_LAUNCH_PAUSE_MS", "4000", 1);
  StartHarness();
  ::unsetenv("NPUPROF_FAULT_SERVICE_LAUNCH_PAUSE_MS");
  CliResult r = Serve({"--served-model-name", "m"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // devices: any free -> t1 is the lease's npu-smi probe; the launch comes after the grant.
  std::string launch_task;
  pid_t holder = -1;
  for (int i = 0; i < 150 && holder < 0; ++i) {
    if (launch_task.empty()) {
      json sum = h_.Cli({"show", last_run_}).json();
      if (sum.is_object())
        for (const auto& t : sum["outstanding_tasks"])
          if (t.value("kind", "") == "service.launch") launch_task = t.value("task_id", "");
    }
    json w = h_.Cli({"workers"}).json();
    if (w.is_object())
      for (const auto& wk : w["workers"])
        for (const auto& t : wk["tasks"])
          if (!launch_task.empty() && t == launch_task) holder = wk.value("pid", -1);
    if (holder < 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(holder, 0) << "no worker took the launch task";
  // Wait until the first attempt has started the service, then kill its worker.
  for (int i = 0; i < 100 && h_.LiveServicePids().empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(h_.LiveServicePids().size(), 1u);
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  json s = WaitFor(last_run_, [](const json& j) {
    return j.value("state", "") == "ready" || j.value("status", "running") != "running";
  });
  ASSERT_EQ(s.value("state", ""), "ready") << s.dump(2);
  EXPECT_EQ(s["service"].value("adopted", false), true);
  auto live = h_.LiveServicePids();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0], s["service"].value("pid", 0));
  json ev = h_.Cli({"events", last_run_, "--json"}).json();
  int redispatched = 0;
  for (const auto& e : ev["events"])
    if (e.value("type", "") == "TaskRedispatched" && e["payload"].value("task_id", "") == launch_task) ++redispatched;
  EXPECT_GE(redispatched, 1);
  StopAndExpectGone(last_run_, live[0]);
}

TEST_F(ServeE2E, CancelStopsTheService) {
  StartHarness();
  CliResult r = Serve({"--served-model-name", "m", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const pid_t pid = r.json()["service"].value("pid", 0);
  CliResult c = h_.Cli({"cancel", last_run_});
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  json s = WaitFor(last_run_, [](const json& j) { return j.value("status", "running") != "running"; });
  EXPECT_EQ(s.value("status", ""), "cancelled") << s.dump(2);
  EXPECT_EQ(s["service"].value("status", ""), "stopped");
  EXPECT_EQ(s["service"]["stop_result"]["force"], true);
  EXPECT_TRUE(h_.LiveServicePids().empty());
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST_F(ServeE2E, StopStillWorksAfterTheServerWasKilled) {
  StartHarness();
  CliResult r = Serve({"--served-model-name", "m", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const pid_t pid = r.json()["service"].value("pid", 0);
  h_.KillServer(SIGKILL);
  EXPECT_TRUE(ProcessAlive(pid));  // the service lives on the target, not under the server
  Status st = h_.RestartServer();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Show(last_run_).value("state", ""), "ready");
  StopAndExpectGone(last_run_, pid);
}

}  // namespace
}  // namespace npuprof::testing
