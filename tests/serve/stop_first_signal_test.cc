// The stop's first signal before its dir check, its wait on the leader's
// exit, and the group script's one look at every member's marker
// (workers/handlers/stop_in_one.h, service_scripts.h; issue 38). The
// commands run locally with /bin/sh against real directories and process
// groups; a target without python3 is played by a PATH of its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/service_runtime_dir.h"
#include "workers/handlers/service_scripts.h"
#include "workers/handlers/stop_in_one.h"
#include "workers/log_tails.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;
using ssh::testing::LocalRun;
using ssh::testing::RunLocalArgv;

const std::vector<StopStep> kLadder = {{"INT", 5000}, {"TERM", 5000}};

struct Service {
  npuprof::testing::TempDir t;
  std::string base = t.path + "/runtime";
  std::string rt = base + "/r1/service-1";
  std::vector<std::string> below = {"r1", "service-1"};
  Service() {
    fs::create_directories(rt + "/.started");
    for (const std::string& p : {base, base + "/r1", rt}) fs::permissions(p, fs::perms::owner_all);
    std::ofstream(rt + "/_start.sh") << "#!/bin/sh\n# npuprof\n#\nNPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\n";
    std::ofstream(rt + "/stderr.log") << "INFO shutting down\n";
  }
  LocalRun Stop(pid_t pid, bool exit_wait = false, const std::string& path_env = "") const {
    return RunLocalArgv(StopInOneArgv(RuntimeDirArgv(false, base, below, {"pid", ".started"}), pid, "r1/service-1",
                                      rt, kLadder, std::chrono::milliseconds(10000), 4096, exit_wait),
                        "", path_env);
  }
};

// A group leader carrying the marker that, on SIGINT, takes `linger` (a
// sleep's argument) to exit; `children` more marked members and one
// unmarked member in its group. Returns once the leader runs its script
// with its INT trap set (it touches a file then): before that, its
// /proc/PID/environ is still the test's (no marker) and a SIGINT would
// kill it rather than run the trap.
pid_t StartService(const char* linger, int children = 0) {
  npuprof::testing::TempDir ready_dir;
  const std::string ready = ready_dir.path + "/trap-set";
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    setenv("NPUPROF_SERVICE", "r1/service-1", 1);
    for (int i = 0; i <= children; ++i) {
      if (fork() == 0) {
        if (i == children) unsetenv("NPUPROF_SERVICE");  // in the group, not ours
        execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
        _exit(127);
      }
    }
    const std::string script =
        std::string("trap 'sleep ") + linger + "; exit 0' INT; : > \"$1\"; while :; do sleep 0.05; done";
    execlp("sh", "sh", "-c", script.c_str(), "service", ready.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Poll for the file with back-off, 10 s at most.
  auto nap = std::chrono::milliseconds(1);
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !fs::exists(ready) && std::chrono::steady_clock::now() < end; nap = std::min(nap * 2, std::chrono::milliseconds(50)))
    std::this_thread::sleep_for(nap);
  EXPECT_TRUE(fs::exists(ready)) << "the simulated service never set its trap";
  return pid;
}

void Reap(pid_t pid) {
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

bool DiedOf(pid_t pid, int& status) { return waitpid(pid, &status, 0) == pid; }

TEST(StopFirstSignal, ARefusedDirStillGetsTheSignalOnceAndItsRecordBeforeTheLiveEnd) {
  Service s;
  fs::permissions(s.rt, fs::perms::group_write, fs::perm_options::add);  // the check refuses it
  const pid_t pid = StartService("0");
  ASSERT_GT(pid, 0);
  const LocalRun r = s.Stop(pid);
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = ParseStopInOne(r.out, kLadder);
  ASSERT_TRUE(f.ok()) << f.status().ToString() << "\n" << r.out;
  EXPECT_NE(f->dir_exit, 0);
  ASSERT_EQ(f->steps.size(), 1u) << r.out;
  EXPECT_EQ(f->steps[0].first.signal, "INT");
  EXPECT_EQ(f->steps[0].first.exit_status, 0);
  auto st = ParseGroupStatus(f->steps[0].first.status_line);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->signalled);
  EXPECT_TRUE(st->leader_alive);
  EXPECT_FALSE(f->steps[0].second.has_value());  // the handler waits, live
  EXPECT_EQ(f->end, "live");
  int status = 0;
  ASSERT_TRUE(DiedOf(pid, status));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);  // its INT trap ran: SIGINT, not a kill
  kill(-pid, SIGKILL);
}

TEST(StopFirstSignal, AnAcceptedDirGetsOneSignalRecordAndTheWaitSeesTheLeaderGo) {
  Service s;
  const pid_t pid = StartService("0.3");
  ASSERT_GT(pid, 0);
  const LocalRun r = s.Stop(pid);
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = ParseStopInOne(r.out, kLadder);
  ASSERT_TRUE(f.ok()) << f.status().ToString() << "\n" << r.out;
  EXPECT_EQ(f->dir_exit, 0);
  ASSERT_EQ(f->steps.size(), 1u) << r.out;
  ASSERT_TRUE(f->steps[0].second.has_value());
  EXPECT_EQ(f->steps[0].second->result, "gone");
  EXPECT_EQ(f->end, "ladder");
  ASSERT_TRUE(f->tails.has_value());
  auto tails = ParseLogTails(*f->tails, 2, 4096);
  ASSERT_TRUE(tails.ok()) << *f->tails;
  EXPECT_EQ((*tails)[0], "INFO shutting down\n");
  int status = 0;
  ASSERT_TRUE(DiedOf(pid, status));
  EXPECT_TRUE(WIFEXITED(status));
}

// A PATH of this machine's tools without python3 (the exit wait then fails
// to start and the wait naps).
struct NoPython {
  npuprof::testing::TempDir t;
  NoPython() {
    for (const char* tool : {"sh", "id", "stat", "grep", "tr", "sleep", "tail", "base64", "cat", "head", "wc",
                             "env"}) {
      const std::string from = "/usr/bin/" + std::string(tool);
      fs::create_symlink(fs::exists(from) ? from : "/bin/" + std::string(tool), t.path + "/" + tool);
    }
  }
};

TEST(StopFirstSignal, TheExitWaitSeesAZombieLeaderGoneAndWithoutPythonTheWaitNaps) {
  // The leader is this test's child: after its exit it stays a zombie until
  // reaped below, as a service's leader does under an init that reaps late.
  for (const bool python : {true, false}) {
    NoPython no_python;
    Service s;
    const pid_t pid = StartService("0.3");
    ASSERT_GT(pid, 0);
    const LocalRun r = s.Stop(pid, /*exit_wait=*/true, python ? "" : no_python.t.path);
    ASSERT_EQ(r.status, 0) << r.err;
    auto f = ParseStopInOne(r.out, kLadder);
    ASSERT_TRUE(f.ok()) << f.status().ToString() << "\n" << r.out;
    ASSERT_EQ(f->steps.size(), 1u) << r.out;
    ASSERT_TRUE(f->steps[0].second.has_value());
    EXPECT_EQ(f->steps[0].second->result, "gone") << (python ? "with the exit wait" : "without python3");
    EXPECT_EQ(f->end, "ladder");
    int status = 0;
    ASSERT_TRUE(DiedOf(pid, status));
  }
}

TEST(StopFirstSignal, WithTheExitWaitASigintThatIsNotObeyedStillEscalatesAfterItsGrace) {
  Service s;
  const pid_t pid = StartService("30");  // its INT trap outlasts the grace
  ASSERT_GT(pid, 0);
  const std::vector<StopStep> ladder = {{"INT", 400}, {"TERM", 5000}};
  const LocalRun r = RunLocalArgv(StopInOneArgv(RuntimeDirArgv(false, s.base, s.below, {"pid", ".started"}), pid,
                                                "r1/service-1", s.rt, ladder, std::chrono::milliseconds(10000), 4096,
                                                /*exit_wait=*/true),
                                  "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto f = ParseStopInOne(r.out, ladder);
  ASSERT_TRUE(f.ok()) << f.status().ToString() << "\n" << r.out;
  ASSERT_EQ(f->steps.size(), 2u) << r.out;
  EXPECT_EQ(f->steps[0].second->result, "alive");
  EXPECT_EQ(f->steps[1].first.signal, "TERM");
  EXPECT_EQ(f->steps[1].second->result, "gone");
  int status = 0;
  ASSERT_TRUE(DiedOf(pid, status));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  kill(-pid, SIGKILL);
}

TEST(StopFirstSignal, WithTheExitWaitTheCommandStartsPythonAsTheMachinesInterpreter) {
  const auto with = StopInOneArgv({"true"}, 1, "r1/service-1", "/rt/r1/service-1", kLadder,
                                  std::chrono::milliseconds(1000), 4096, true);
  const auto without = StopInOneArgv({"true"}, 1, "r1/service-1", "/rt/r1/service-1", kLadder,
                                     std::chrono::milliseconds(1000), 4096, false);
  auto names_python = [](const std::vector<std::string>& argv) {
    for (const auto& a : argv)
      if (a.find("NPUPROF_PYTHON") != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(names_python(with));
  EXPECT_FALSE(names_python(without));  // no interpreter to resolve before the first signal
}

TEST(StopFirstSignal, AGroupsMembersAreJudgedByTheirOwnMarkerInOneLook) {
  Service s;
  const pid_t pid = StartService("0", /*children=*/2);
  ASSERT_GT(pid, 0);
  // The group: the leader, two marked members, one unmarked. Wait until the
  // children are in it (fork returns before they exist in /proc for us).
  LocalRun r;
  for (int i = 0; i < 200; ++i) {
    r = RunLocalArgv(GroupStatusArgv(pid, "r1/service-1", s.rt), "");
    if (r.out.find("members=3") != std::string::npos) break;
    usleep(10000);
  }
  auto st = ParseGroupStatus(r.out);
  ASSERT_TRUE(st.ok()) << r.out;
  EXPECT_TRUE(st->leader_alive);
  EXPECT_EQ(st->members, 3) << r.out;  // the unmarked one is not counted
  Reap(pid);
  // Gone: no member left, whatever the marker.
  r = RunLocalArgv(GroupStatusArgv(pid, "r1/service-1", s.rt), "");
  st = ParseGroupStatus(r.out);
  ASSERT_TRUE(st.ok()) << r.out;
  EXPECT_FALSE(st->any_alive()) << r.out;
}

}  // namespace
}  // namespace npuprof::workers::service
