// Leases tell the truth, end to end: a serve run whose stop cannot reach the
// target ends saying its service may still be running, and its NPUs are
// quarantined — the next run on them waits, probes them, sees the orphaned
// service's processes, and starts only once a probe shows them idle (after
// the test kills the orphan by its pid). A real loopback sshd, the simulated
// target, `npuprof server` with local workers.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

class QuarantineE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = h_.Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    model_ = h_.MakeModel({"--kind", "dense", "--layers", "2"});
    ASSERT_FALSE(model_.empty());
  }
  void TearDown() override {
    if (orphan_ > 0) ::kill(-orphan_, SIGKILL);
    if (HasFailure())
      for (const auto& run : runs_) {
        CliResult ev = h_.Cli({"events", run});
        std::cerr << "events of " << run << ":\n" << ev.out << ev.err << std::endl;
      }
    h_.Stop();
  }
  std::string Serve(std::vector<std::string> extra) {
    std::vector<std::string> argv = {"submit", "serve", "--machine", "sim1", "--model", model_, "--tp", "2",
                                     "--devices", "0,1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CliResult r = h_.Cli(argv);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string id = r.json().value("run_id", "");
    if (!id.empty()) runs_.push_back(id);
    return id;
  }
  json Show(const std::string& run) { return h_.Cli({"show", run}).json(); }
  template <typename Pred>
  json WaitFor(const std::string& run, Pred pred, int timeout_s) {
    json s;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      s = Show(run);
      if (pred(s)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }
  // The DevicesChecked events of a run so far.
  std::vector<json> Checks(const std::string& run) {
    std::vector<json> out;
    json ev = h_.Cli({"events", run, "--json"}).json();
    const json& list = ev.is_object() ? ev["events"] : ev;
    if (!list.is_array()) return out;
    for (const auto& e : list)
      if (e.value("type", "") == "DevicesChecked") out.push_back(e.value("payload", json::object()));
    return out;
  }

  NpuprofHarness h_;
  std::string model_;
  std::vector<std::string> runs_;
  pid_t orphan_ = -1;
};

TEST_F(QuarantineE2E, DevicesOfAServiceThatMayStillRunWaitForAProbeThatShowsThemIdle) {
  const std::string first = Serve({"--wait"});
  json ready = Show(first);
  ASSERT_EQ(ready.value("state", ""), "ready") << ready.dump(2);
  orphan_ = ready["service"].value("pid", 0);
  ASSERT_GT(orphan_, 0);

  // The target becomes unreachable: every attempt of the stop fails.
  h_.sshd().Stop();
  CliResult c = h_.Cli({"cancel", first});
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  json ended = WaitFor(first, [](const json& j) { return j.value("status", "running") != "running"; }, 120);
  ASSERT_NE(ended.value("status", "running"), "running") << ended.dump(2);
  EXPECT_NE(ended.value("error", "").find("may still be running"), std::string::npos) << ended.dump(2);
  EXPECT_EQ(::kill(orphan_, 0), 0) << "the service outlived its run";

  json listed = h_.Cli({"runs", "--json"}).json();
  ASSERT_TRUE(listed.contains("quarantined")) << listed.dump(2);
  ASSERT_EQ(listed["quarantined"].size(), 2u) << listed.dump(2);
  for (const auto& q : listed["quarantined"]) {
    EXPECT_EQ(q.value("machine", ""), "sim1");
    EXPECT_EQ(q.value("run_id", ""), first);
    EXPECT_NE(q.value("why", "").find("service.stop failed"), std::string::npos) << q.dump();
  }
  CliResult table = h_.Cli({"runs"});
  EXPECT_NE(table.out.find("quarantined: device 0 on sim1"), std::string::npos) << table.out;

  // The target is back; a run on the same NPUs waits for the quarantine.
  ASSERT_TRUE(h_.sshd().Relaunch().ok());
  const std::string second = Serve({});
  ASSERT_FALSE(second.empty());
  // Its probe sees the orphan's processes on the devices: still quarantined.
  std::vector<json> checks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (checks.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    checks = Checks(second);
  }
  ASSERT_FALSE(checks.empty()) << "no probe of the quarantined devices";
  EXPECT_TRUE(checks[0]["idle"].empty()) << checks[0].dump();
  ASSERT_FALSE(checks[0]["busy"].empty()) << checks[0].dump();
  EXPECT_NE(checks[0]["busy"][0].value("reason", "").find("process listed"), std::string::npos) << checks[0].dump();
  json waiting = h_.Cli({"runs", "--json"}).json();
  std::string reason;
  for (const auto& r : waiting["runs"])
    if (r.value("run_id", "") == second) reason = r["waiting_for"].value("reason", "");
  EXPECT_NE(reason.find("quarantined"), std::string::npos) << waiting.dump(2);
  EXPECT_EQ(Show(second).value("state", ""), "queued");

  // Someone ends the orphan; the next probe shows the devices idle.
  ASSERT_EQ(::kill(-orphan_, SIGKILL), 0);
  json s = WaitFor(second, [](const json& j) {
    return j.value("state", "") == "ready" || j.value("status", "running") != "running";
  }, 120);
  ASSERT_EQ(s.value("state", ""), "ready") << s.dump(2);
  EXPECT_FALSE(h_.Cli({"runs", "--json"}).json().contains("quarantined"));
  const std::vector<json> after = Checks(second);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back()["idle"], json({0, 1})) << after.back().dump();

  CliResult stop = h_.Cli({"stop", second, "--wait"});
  EXPECT_EQ(stop.exit_code, 0) << stop.out << stop.err;
  CliResult v = h_.Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

// The quarantine outlives the server: it is on the machines stream.
TEST_F(QuarantineE2E, TheQuarantineSurvivesAServerRestart) {
  const std::string first = Serve({"--wait"});
  json ready = Show(first);
  orphan_ = ready["service"].value("pid", 0);
  ASSERT_GT(orphan_, 0);
  h_.sshd().Stop();
  ASSERT_EQ(h_.Cli({"cancel", first}).exit_code, 0);
  json ended = WaitFor(first, [](const json& j) { return j.value("status", "running") != "running"; }, 120);
  ASSERT_NE(ended.value("status", "running"), "running") << ended.dump(2);
  h_.KillServer(SIGKILL);
  ASSERT_TRUE(h_.RestartServer().ok());
  json listed = h_.Cli({"runs", "--json"}).json();
  ASSERT_TRUE(listed.contains("quarantined")) << listed.dump(2);
  EXPECT_EQ(listed["quarantined"].size(), 2u);
  CliResult v = h_.Cli({"verify"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

}  // namespace
}  // namespace npuprof::testing
