// The one-command folds of service.launch and service.stop for far targets
// (issue 42): workers/handlers/launch_prepare.h (the runtime dir's check and
// the port pick) and workers/handlers/stop_in_one.h (the stop's ladder on
// the target). Their parsers over good and malformed outputs, then the
// commands run locally with /bin/sh against real directories and process
// groups, and their outputs read back.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/launch_prepare.h"
#include "workers/handlers/service_runtime_dir.h"
#include "workers/handlers/service_scripts.h"
#include "workers/handlers/stop_in_one.h"
#include "workers/log_tails.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;
using ssh::testing::RunLocalArgv;

// ---- the launch's check and port pick ----

TEST(LaunchPrepare, ParsesThePortLine) {
  auto p = ParsePreparedPort("uid 1000 me\ndir ok\nentry absent - pid\n");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->asked);
  p = ParsePreparedPort("uid 1000 me\ndir ok\nnpuprof-port 31234\n");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->asked);
  EXPECT_EQ(p->port, 31234);
  p = ParsePreparedPort("dir ok\nnpuprof-port-failed\n");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->asked);
  EXPECT_EQ(p->port, 0);
  for (const char* bad : {"npuprof-port \n", "npuprof-port abc\n", "npuprof-port 0\n", "npuprof-port 70000\n",
                          "npuprof-port 123456\n", "npuprof-port 12 34\n", "npuprof-port -5\n", "npuprof-portx\n",
                          "npuprof-port 80\nnpuprof-port 81\n", "npuprof-port-failed\nnpuprof-port 81\n",
                          "npuprof-port \xff\xfe\n"}) {
    auto b = ParsePreparedPort(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), Code::kCorruption) << bad;
  }
}

struct Dirs {
  npuprof::testing::TempDir t;
  std::string base = t.path + "/runtime";
  std::string rt = base + "/r1/service-1";
  std::vector<std::string> below = {"r1", "service-1"};
};

ssh::testing::LocalRun Prepare(const Dirs& d, bool pick) {
  const std::vector<std::string> entries = {"launch.json", ".started", "pid"};
  return RunLocalArgv(LaunchPrepareArgv(RuntimeDirArgv(true, d.base, d.below, entries), d.rt, entries, pick), "");
}

TEST(LaunchPrepare, AFirstLaunchGetsItsDirAndAPortInOneCommand) {
  Dirs d;
  auto r = Prepare(d, true);
  ASSERT_EQ(r.status, 0) << r.err;
  auto report = ParseRuntimeDirReport(r.out);
  ASSERT_TRUE(report.ok()) << r.out;
  EXPECT_TRUE(report->exists);
  EXPECT_EQ(report->Entry("launch.json").type, "absent");
  EXPECT_TRUE(fs::is_directory(d.rt));
  auto port = ParsePreparedPort(r.out);
  ASSERT_TRUE(port.ok()) << r.out;
  if (system("python3 -c pass") != 0) GTEST_SKIP() << "no python3 here";
  EXPECT_TRUE(port->asked);
  EXPECT_GT(port->port, 0) << r.out << r.err;
  // Not asked for: the check alone.
  r = Prepare(d, false);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(ParsePreparedPort(r.out)->asked);
}

TEST(LaunchPrepare, ALaunchThatFoundItsRecordOrStartPicksNoPort) {
  for (const char* entry : {"launch.json", ".started", "pid"}) {
    Dirs d;
    fs::create_directories(d.rt);
    fs::permissions(d.base, fs::perms::owner_all);
    fs::permissions(d.base + "/r1", fs::perms::owner_all);
    fs::permissions(d.rt, fs::perms::owner_all);
    std::ofstream(d.rt + "/" + entry) << "x";
    auto r = Prepare(d, true);
    ASSERT_EQ(r.status, 0) << r.err;
    auto report = ParseRuntimeDirReport(r.out);
    ASSERT_TRUE(report.ok()) << r.out;
    EXPECT_EQ(report->Entry(entry).type, "file");
    auto port = ParsePreparedPort(r.out);
    ASSERT_TRUE(port.ok());
    EXPECT_FALSE(port->asked) << entry << ": " << r.out;
  }
}

TEST(LaunchPrepare, ARefusedDirIsTheChecksRefusalAndPicksNoPort) {
  Dirs d;
  fs::create_directories(d.rt);
  fs::permissions(d.base, fs::perms::owner_all | fs::perms::group_write);
  auto r = Prepare(d, true);
  EXPECT_EQ(r.status, 5) << r.out;
  ASSERT_TRUE(RuntimeDirRefusal(r.err).has_value()) << r.err;
  EXPECT_NE(RuntimeDirRefusal(r.err)->find("writable by group"), std::string::npos);
  EXPECT_FALSE(ParsePreparedPort(r.out)->asked);
}

// ---- the stop's ladder on the target ----

const std::vector<StopStep> kPlain = {{"INT", 300}, {"TERM", 300}};

TEST(StopInOne, ParsesALadderAndRefusesWhatItDoesNotSend) {
  const std::string tails = "npuprof-tails\n0 ok aGk=\n1 missing\n";
  auto f = ParseStopInOne("banner\nnpuprof-stop-dir 0\nuid 1 me\ndir ok\nentry file 1 pid\n"
                          "npuprof-stop-signal INT 0 leader=alive members=2 signalled=yes\n"
                          "npuprof-stop-wait INT alive 301\n"
                          "npuprof-stop-signal TERM 0 leader=alive members=1 signalled=yes\n"
                          "npuprof-stop-wait TERM gone 12\nnpuprof-stop-end ladder\n" + tails,
                          kPlain);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->dir_exit, 0);
  EXPECT_EQ(f->dir_report, "uid 1 me\ndir ok\nentry file 1 pid\n");
  ASSERT_EQ(f->steps.size(), 2u);
  EXPECT_EQ(f->steps[0].first.status_line, "leader=alive members=2 signalled=yes");
  EXPECT_EQ(f->steps[0].second->result, "alive");
  EXPECT_EQ(f->steps[0].second->waited_ms, 301);
  EXPECT_EQ(f->steps[1].second->result, "gone");
  EXPECT_EQ(f->end, "ladder");
  ASSERT_TRUE(f->tails.has_value());
  EXPECT_EQ(*f->tails, tails);
  auto live = ParseStopInOne("npuprof-stop-dir 5\nuid 1 me\nnpuprof-stop-end live\n", kPlain);
  ASSERT_TRUE(live.ok());
  EXPECT_EQ(live->dir_exit, 5);
  EXPECT_TRUE(live->steps.empty());
  EXPECT_FALSE(live->tails.has_value());
  const std::string dir = "npuprof-stop-dir 0\ndir ok\n";
  const std::string sig = "npuprof-stop-signal INT 0 leader=alive members=1 signalled=yes\n";
  for (const std::string& bad : std::vector<std::string>{
           "", "npuprof-stop-end live\n", "npuprof-stop-dir x\nnpuprof-stop-end live\n",
           "npuprof-stop-dir 0\ndir ok\n",                                                  // cut short
           dir + "npuprof-stop-signal TERM 0 leader=alive members=1 signalled=yes\nnpuprof-stop-end live\n",
           dir + sig + sig + "npuprof-stop-end live\n",                                     // no wait between
           dir + "npuprof-stop-wait INT gone 1\nnpuprof-stop-end live\n",                   // no signal before
           dir + sig + "npuprof-stop-wait INT maybe 1\nnpuprof-stop-end live\n",
           dir + sig + "npuprof-stop-wait INT gone -1\nnpuprof-stop-end live\n",
           dir + sig + "npuprof-stop-wait TERM gone 1\nnpuprof-stop-end live\n",
           dir + sig + "npuprof-stop-wait INT gone 1\nnpuprof-stop-signal TERM 0 x\nnpuprof-stop-end live\n",
           dir + "npuprof-stop-signal INT x leader=gone\nnpuprof-stop-end live\n",
           dir + sig + "npuprof-stop-wait INT alive 300\n"
                 "npuprof-stop-signal TERM 0 leader=alive members=1 signalled=yes\nnpuprof-stop-wait TERM alive 300\n"
                 "npuprof-stop-signal KILL 0 leader=alive members=1 signalled=yes\nnpuprof-stop-end ladder\n",
           dir + "something else\n" + sig + "npuprof-stop-end sometime\n",
           dir + "npuprof-stop-end\n", dir + "npuprof-stop-end later\n", dir + "npuprof-stop-bogus\n"}) {
    auto b = ParseStopInOne(bad, kPlain);
    EXPECT_FALSE(b.ok()) << bad;
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), Code::kCorruption) << bad;
    }
  }
}

// A process in a group of its own carrying the marker, as _start.sh runs the service.
pid_t StartMarked(bool ignore_int) {
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    if (ignore_int) signal(SIGINT, SIG_IGN);
    setenv("NPUPROF_SERVICE", "r1/service-1", 1);
    execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

struct StopDirs : Dirs {
  StopDirs() {
    fs::create_directories(rt + "/.started");
    for (const std::string& p : {base, base + "/r1", rt}) fs::permissions(p, fs::perms::owner_all);
    std::ofstream(rt + "/_start.sh") << "NPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\n";
    std::ofstream(rt + "/stderr.log") << "INFO shutting down\n";
  }
};

Result<StopFold> Stop(const StopDirs& d, pid_t pid, const std::vector<StopStep>& steps, int budget_ms,
                      ssh::testing::LocalRun* run = nullptr) {
  auto r = RunLocalArgv(StopInOneArgv(RuntimeDirArgv(false, d.base, d.below, {"pid", ".started"}), pid,
                                      "r1/service-1", d.rt, steps, std::chrono::milliseconds(budget_ms), 4096),
                        "");
  if (run) *run = r;
  EXPECT_EQ(r.status, 0) << r.err;
  return ParseStopInOne(r.out, steps);
}

TEST(StopInOne, AServiceThatExitsOnSigintIsStoppedAndItsLogsReadInOneCommand) {
  StopDirs d;
  const pid_t pid = StartMarked(false);
  ASSERT_GT(pid, 0);
  auto f = Stop(d, pid, kPlain, 10000);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->steps.size(), 1u);
  EXPECT_NE(f->steps[0].first.status_line.find("signalled=yes"), std::string::npos);
  ASSERT_TRUE(f->steps[0].second.has_value());
  EXPECT_EQ(f->steps[0].second->result, "gone");
  EXPECT_EQ(f->end, "ladder");
  ASSERT_TRUE(f->tails.has_value());
  auto tails = ParseLogTails(*f->tails, 2, 4096);
  ASSERT_TRUE(tails.ok()) << *f->tails;
  EXPECT_EQ((*tails)[0], "INFO shutting down\n");
  EXPECT_EQ((*tails)[1], "");
}

TEST(StopInOne, IgnoredSigintEscalatesToSigtermAfterTheGrace) {
  StopDirs d;
  const pid_t pid = StartMarked(true);
  ASSERT_GT(pid, 0);
  auto f = Stop(d, pid, kPlain, 10000);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->steps.size(), 2u);
  EXPECT_EQ(f->steps[0].second->result, "alive");
  EXPECT_GE(f->steps[0].second->waited_ms, 300);  // the grace, measured on the target
  EXPECT_EQ(f->steps[1].first.signal, "TERM");
  EXPECT_EQ(f->steps[1].second->result, "gone");
  EXPECT_EQ(f->end, "ladder");
}

TEST(StopInOne, TheBudgetHandsTheRestOfTheWaitToTheHandler) {
  StopDirs d;
  const pid_t pid = StartMarked(true);
  ASSERT_GT(pid, 0);
  auto f = Stop(d, pid, {{"INT", 60000}, {"TERM", 60000}}, 2000);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->steps.size(), 1u);
  EXPECT_EQ(f->steps[0].second->result, "pending");
  // The budget counts the whole command (the check and the signal too); the
  // wait's own part is what the handler subtracts from the grace.
  EXPECT_LT(f->steps[0].second->waited_ms, 60000);
  EXPECT_EQ(f->end, "budget");
  EXPECT_FALSE(f->tails.has_value());
  EXPECT_EQ(kill(pid, 0), 0);  // SIGINT only, and ignored
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(StopInOne, APidWithoutTheMarkerIsNotSignalledAndAnUnknownPidGoesNoFurtherThanTheCheck) {
  StopDirs d;
  const pid_t foreign = fork();
  if (foreign == 0) {
    setsid();
    execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(foreign, 0);
  auto f = Stop(d, foreign, kPlain, 10000);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->steps.size(), 1u);
  EXPECT_NE(f->steps[0].first.status_line.find("leader=foreign"), std::string::npos);
  EXPECT_NE(f->steps[0].first.status_line.find("signalled=no"), std::string::npos);
  EXPECT_FALSE(f->steps[0].second.has_value());
  EXPECT_EQ(f->end, "ladder");
  EXPECT_EQ(kill(foreign, 0), 0);  // never signalled
  kill(foreign, SIGKILL);
  waitpid(foreign, nullptr, 0);

  auto unknown = Stop(d, 0, kPlain, 10000);
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(unknown->steps.empty());
  EXPECT_EQ(unknown->end, "live");
  auto report = ParseRuntimeDirReport(unknown->dir_report);
  ASSERT_TRUE(report.ok()) << unknown->dir_report;
  EXPECT_EQ(report->Entry(".started").type, "dir");
}

}  // namespace
}  // namespace npuprof::workers::service
