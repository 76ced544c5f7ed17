// End to end, from the command line as a user would: server + machine add +
// submit probe --wait against the simulated target over a real sshd.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

TEST(ProbeCli, ProbeReportsDevicesAndFreeBusy) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--layout", "910B3", "--devices", "8", "--busy", "3:proc", "--busy", "5:hbm"}).ok());
  CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = r.json();
  EXPECT_FALSE(j.value("run_id", "").empty());
  EXPECT_EQ(j["status"], "ok");
  const auto& probe = j["probe"];
  EXPECT_EQ(probe["device_count"], 8);
  std::vector<int> free_ids = probe["free_devices"].get<std::vector<int>>();
  EXPECT_EQ(free_ids, (std::vector<int>{0, 1, 2, 4, 6, 7}));
  ASSERT_EQ(probe["busy_devices"].size(), 2u);
  EXPECT_EQ(probe["busy_devices"][0]["logical_id"], 3);
  EXPECT_EQ(probe["busy_devices"][1]["logical_id"], 5);
  // The raw npu-smi text is kept as evidence (content-addressed blob).
  ASSERT_TRUE(probe.contains("evidence"));
  const std::string sha = probe["evidence"]["npu_smi_info.txt"];
  EXPECT_EQ(sha.size(), 64u);

  // The audit log shows every transition with its cause.
  CliResult ev = h.Cli({"events", j["run_id"].get<std::string>(), "--json"});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  std::vector<std::string> types;
  const auto evj = ev.json();
  for (const auto& e : evj["events"]) types.push_back(e["type"]);
  EXPECT_EQ(types, (std::vector<std::string>{"RunSubmitted", "StateChanged", "TaskScheduled", "TaskSucceeded",
                                             "ProbeRecorded", "StateChanged", "RunFinished"}));
  CliResult runs = h.Cli({"runs", "--json", "--kind", "probe"});
  ASSERT_EQ(runs.exit_code, 0);
  EXPECT_EQ(runs.json()["runs"].size(), 1u);
}

TEST(ProbeCli, NpuSmiMissingFailsWithClearReason) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--npu-smi-missing"}).ok());
  CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  auto j = r.json();
  EXPECT_EQ(j["status"], "failed");
  EXPECT_NE(j["error"].get<std::string>().find("npu_smi_missing"), std::string::npos) << j.dump();
}

TEST(ProbeCli, UnknownMachineIsRefusedBeforeAnythingRuns) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  CliResult r = h.Cli({"submit", "probe", "--machine", "nope", "--wait"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("machine"), std::string::npos) << r.err;
  EXPECT_EQ(h.Cli({"runs", "--json"}).json()["runs"].size(), 0u);
}

TEST(ProbeCli, ClientWithoutServerSaysSoAndExits2) {
  NpuprofHarness h;
  CliResult r = h.CliRaw({"runs", "--data-dir", "/tmp/npuprof-no-such-server-dir"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no npuprof server"), std::string::npos) << r.err;
}

TEST(ProbeCli, UnreachableMachineFailsAfterRetries) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  // A machine whose port nobody listens on.
  CliResult add = h.Cli({"machine", "add", "dead", "--host", "127.0.0.1", "--port",
                         std::to_string(FreeLoopbackPort()), "--user", h.sshd().user(), "--identity",
                         h.sshd().identity_file(), "--known-hosts", h.sshd().known_hosts_file()});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  CliResult r = h.Cli({"submit", "probe", "--machine", "dead", "--wait"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.json()["error"].get<std::string>().find("unreachable"), std::string::npos);
  // Three attempts were made (retry with backoff), all recorded.
  CliResult ev = h.Cli({"events", r.json()["run_id"].get<std::string>(), "--json"});
  int failures = 0;
  const auto evj = ev.json();
  for (const auto& e : evj["events"]) failures += e["type"].get<std::string>() == "TaskFailed" ? 1 : 0;
  EXPECT_EQ(failures, 3) << ev.out << ev.err;
}

TEST(ProbeCli, HostKeyMismatchIsRefused) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  ASSERT_TRUE(h.sshd().RestartWithNewHostKey().ok());
  CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.json()["error"].get<std::string>().find("host_key_mismatch"), std::string::npos) << r.out;
}


// A machine added with --accept-new-host-key and a known_hosts file that
// does not know the host: the first run accepts the key, and the inventory
// records it once (MachineHostKeyAccepted on the machines stream); later runs
// verify against it and record nothing more.
TEST(ProbeCli, AnAcceptedNewHostKeyIsRecordedOnce) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  const std::string known = h.Dir() + "/empty_known_hosts";
  { std::ofstream(known) << ""; }
  CliResult add = h.Cli({"machine", "add", "fresh", "--host", "127.0.0.1", "--port", std::to_string(h.sshd().port()),
                         "--user", h.sshd().user(), "--identity", h.sshd().identity_file(), "--known-hosts", known,
                         "--accept-new-host-key", "--env-script", h.SimRoot() + "/set_env.sh", "--runtime-base",
                         h.Dir() + "/runtime"});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  for (int i = 0; i < 2; ++i) {
    CliResult r = h.Cli({"submit", "probe", "--machine", "fresh", "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  }
  CliResult list = h.Cli({"machine", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto machines = list.json();
  std::string accepted;
  for (const auto& m : machines.value("machines", nlohmann::json::array()))
    if (m.value("name", "") == "fresh") accepted = m.value("accepted_host_key", "");
  EXPECT_EQ(accepted.rfind("SHA256:", 0), 0u) << list.out;
  CliResult ev = h.Cli({"events", "_machines", "--json"});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  int acceptances = 0;
  const auto stream = ev.json();
  for (const auto& e : stream["events"]) acceptances += e.value("type", "") == "MachineHostKeyAccepted";
  EXPECT_EQ(acceptances, 1) << ev.out;
}

// How --wait reports progress: on a terminal one line rewritten in place
// (run, state, elapsed, step); without one, a line per event; with -q only
// the run id on stdout. The terminal is a real pty (util-linux `script`).
TEST(ProbeCli, WaitShowsOneLiveLineOnATerminalEventLinesOtherwiseAndQuietOnlyTheId) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start({"--devices", "2"}).ok());
  CliResult quiet = h.Cli({"submit", "probe", "--machine", "sim1", "--wait", "-q"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_TRUE(std::regex_match(quiet.out, std::regex("r[0-9]+-[0-9a-f]+\n"))) << quiet.out;
  EXPECT_EQ(quiet.err, "");

  CliResult piped = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_NE(piped.err.find("#1 RunSubmitted"), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find("\x1b[K"), std::string::npos) << "no terminal codes into a pipe";

  const std::string cmd = NpuprofBinary() + " submit probe --machine sim1 --wait --data-dir " + h.DataDir();
  CliResult tty = RunCommand({"/usr/bin/script", "-qfec", cmd, "/dev/null"}, 120);
  ASSERT_EQ(tty.exit_code, 0) << tty.out << tty.err;
  EXPECT_NE(tty.out.find("\r\x1b[K"), std::string::npos) << tty.out;
  EXPECT_TRUE(std::regex_search(tty.out, std::regex("r[0-9]+-[0-9a-f]+ ok [0-9]+:[0-9]{2}"))) << tty.out;
  EXPECT_EQ(tty.out.find("#1 RunSubmitted"), std::string::npos) << "event lines on a terminal: " << tty.out;
  EXPECT_NE(tty.out.find("\"status\": \"ok\""), std::string::npos) << "the final JSON still comes";
}

}  // namespace
}  // namespace npuprof::testing
