// The server dies and comes back on the same data dir: unfinished runs are
// recovered (RunRecovered, outstanding tasks re-dispatched) with no manual
// step, waiting clients carry on, and the store keeps every run.
#include <future>

#include <gtest/gtest.h>

#include "broker_test_util.h"

namespace npuprof::testing {
namespace {

void ExpectRecoveredAndCompleted(NpuprofHarness& h, const std::string& run_id) {
  auto shown = WaitFinished(h, run_id, 90);
  ASSERT_TRUE(shown.has_value()) << "run did not finish; events: " << TypesOf(Events(h, run_id));
  EXPECT_EQ((*shown)["status"], "ok") << shown->dump();
  EXPECT_GE((*shown)["recoveries"].get<int>(), 1);
  const json events = Events(h, run_id);
  const auto recovered = EventsOfType(events, "RunRecovered");
  ASSERT_EQ(recovered.size(), 1u) << TypesOf(events);
  ASSERT_EQ(recovered[0]["payload"]["outstanding_tasks"].size(), 1u);
  EXPECT_EQ(recovered[0]["payload"]["outstanding_tasks"][0]["task_id"], run_id + ".t1");
  EXPECT_EQ(recovered[0]["cause"], "recovery");
  const auto redispatched = EventsOfType(events, "TaskRedispatched");
  ASSERT_EQ(redispatched.size(), 1u) << TypesOf(events);
  EXPECT_EQ(redispatched[0]["payload"]["reason"], "recovery");
  EXPECT_EQ(redispatched[0]["payload"]["attempt"], 2);
  const auto succeeded = EventsOfType(events, "TaskSucceeded");
  ASSERT_EQ(succeeded.size(), 1u) << TypesOf(events);
  EXPECT_EQ(succeeded[0]["payload"]["attempt"], 2);
  EXPECT_EQ(EventsOfType(events, "RunFinished").size(), 1u);
  // The sequence has no gap and the hash chain links every event to the previous one.
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["seq"], i + 1);
    if (i > 0) {
      EXPECT_EQ(events[i]["prev_hash"], events[i - 1]["hash"]);
    }
  }
}

TEST(BrokerRecovery, CrashBeforeDispatchIsRecoveredOnRestart) {
  NpuprofHarness h;
  h.SetServerEnv({{"NPUPROF_FAULT_CRASH_BEFORE_DISPATCH", "probe.npu_smi"}});
  ASSERT_TRUE(h.Start().ok());
  // The server commits the submission, answers, then dies before handing the
  // task to a worker (the answer may or may not get out first).
  CliResult sub = h.Cli({"submit", "probe", "--machine", "sim1", "--run-id", "crash-before-dispatch"}, 30);
  ASSERT_TRUE(h.WaitForServerExit(30)) << "fault injection did not stop the server: " << sub.err;
  h.SetServerEnv({});
  ASSERT_TRUE(h.RestartServer().ok());
  ExpectRecoveredAndCompleted(h, "crash-before-dispatch");
  const json events = Events(h, "crash-before-dispatch");
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]["type"], "RunSubmitted");
  EXPECT_EQ(events[2]["type"], "TaskScheduled");
  EXPECT_EQ(events[3]["type"], "RunRecovered");
}

TEST(BrokerRecovery, ServerKilledMidTaskIsRecoveredOnRestart) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string started = AddSlowMachine(h, "slow", 30);
  const std::string run_id = SubmitProbe(h, "slow");
  ASSERT_FALSE(run_id.empty());
  ASSERT_TRUE(WaitForFile(started, 60));
  h.KillServer(SIGKILL);
  ASSERT_TRUE(h.RestartServer().ok());
  ExpectRecoveredAndCompleted(h, run_id);
}

TEST(BrokerRecovery, SubmitWaitSurvivesAServerRestart) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string started = AddSlowMachine(h, "slow", 30);
  auto waiting = std::async(std::launch::async, [&h] {
    return h.Cli({"submit", "probe", "--machine", "slow", "--run-id", "waited-run", "--wait"}, 110);
  });
  ASSERT_TRUE(WaitForFile(started, 60));
  h.KillServer(SIGKILL);
  ASSERT_TRUE(h.RestartServer().ok());
  CliResult r = waiting.get();
  EXPECT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json j = r.json();
  EXPECT_EQ(j["run_id"], "waited-run");
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["probe"]["device_count"], 8);
  ExpectRecoveredAndCompleted(h, "waited-run");
}

// What `runs` and `show` say about every run, keyed by run id.
json Snapshot(NpuprofHarness& h) {
  json out = json::object();
  json runs = h.Cli({"runs", "--json"}).json();
  for (const auto& r : runs.value("runs", json::array())) {
    const std::string id = r["run_id"];
    out[id] = {{"row", r}, {"show", h.Cli({"show", id}).json()}, {"events", Events(h, id).size()}};
  }
  return out;
}

TEST(BrokerRecovery, StoreReopenKeepsEveryRun) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  // Two completed runs, one failed (a machine nobody listens on), one cancelled.
  for (int i = 0; i < 2; ++i) {
    CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait", "--tag", "t" + std::to_string(i)});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  }
  CliResult add = h.Cli({"machine", "add", "dead", "--host", "127.0.0.1", "--port", std::to_string(FreeLoopbackPort()),
                         "--user", h.sshd().user(), "--identity", h.sshd().identity_file(), "--known-hosts",
                         h.sshd().known_hosts_file()});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  ASSERT_EQ(h.Cli({"submit", "probe", "--machine", "dead", "--wait"}).exit_code, 1);
  const std::string started = AddSlowMachine(h, "slow", 30);
  const std::string cancelled = SubmitProbe(h, "slow");
  ASSERT_TRUE(WaitForFile(started, 60));
  ASSERT_EQ(h.Cli({"cancel", cancelled}).exit_code, 0);
  ASSERT_TRUE(WaitFinished(h, cancelled, 30).has_value());

  const json before = Snapshot(h);
  ASSERT_EQ(before.size(), 4u) << before.dump();
  EXPECT_EQ(before[cancelled]["show"]["status"], "cancelled");

  // A clean stop, then a crash: both reopen the same store.
  h.KillServer(SIGTERM);
  ASSERT_TRUE(h.RestartServer().ok());
  EXPECT_EQ(Snapshot(h), before);
  h.KillServer(SIGKILL);
  ASSERT_TRUE(h.RestartServer().ok());
  EXPECT_EQ(Snapshot(h), before);
  // Finished runs are not "recovered".
  for (const auto& [id, s] : before.items()) EXPECT_EQ(s["show"]["recoveries"], 0) << id;
  // And the store still takes new runs after the reopen.
  CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(h.Cli({"runs", "--json"}).json()["runs"].size(), 5u);
}

}  // namespace
}  // namespace npuprof::testing
