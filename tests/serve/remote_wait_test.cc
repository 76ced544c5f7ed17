// The remote wait loop (workers/remote_wait.h) and the service's checks for
// it (service_scripts.h), run locally with /bin/sh: a signal that comes
// while the loop runs ends it with "signal", a slice without one ends with
// "timeout", values travel verbatim as arguments, and the readiness and
// stop checks read a marked process, its log and its process group.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/service_scripts.h"
#include "workers/remote_wait.h"

namespace npuprof::workers {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

using TempDir = npuprof::testing::TempDir;

// The loop under /bin/sh here, as the target would run it (path_env: the
// whole PATH, when given).
Result<RemoteWaitResult> RunLocally(const RemoteCheck& check, milliseconds slice, const std::string& path_env = "") {
  const auto r = ssh::testing::RunLocalArgv(RemoteWaitArgv(check, slice), "", path_env);
  if (r.status != 0) return Status::Io("the loop exited " + std::to_string(r.status) + ": " + r.err);
  return ParseRemoteWait(r.out);
}

// A child in its own process group that runs `script` with `env` (a
// "NAME=value" list, nothing else in its environment).
pid_t Spawn(const std::string& script, const std::vector<std::string>& env) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    std::vector<char*> envp;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(const_cast<char*>("PATH=/usr/bin:/bin"));
    envp.push_back(nullptr);
    char* const argv[] = {const_cast<char*>("sh"), const_cast<char*>("-c"), const_cast<char*>(script.c_str()),
                          nullptr};
    execve("/bin/sh", argv, envp.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

void Reap(pid_t pid) {
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(RemoteWait, AFileThatAppearsDuringTheSliceEndsItWithTheSignal) {
  TempDir t;
  const std::string path = t.path + "/done.rc";
  // Late enough that the first poll comes before it on a loaded machine
  // (the check's own shell can take a few hundred ms to start there).
  const pid_t writer = Spawn("sleep 1.5; echo 0 > '" + path + "'", {});
  auto r = RunLocally(FileExistsCheck(path), milliseconds(20000));
  waitpid(writer, nullptr, 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signalled);
  EXPECT_EQ(r->observation, "exists");
  EXPECT_GT(r->polls, 1);  // it was absent at first
  EXPECT_LT(r->waited_ms, 20000);
}

TEST(RemoteWait, ASliceWithoutTheSignalEndsWithTimeoutAfterTheSlice) {
  TempDir t;
  auto r = RunLocally(FileExistsCheck(t.path + "/never"), milliseconds(150));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->signalled);
  EXPECT_EQ(r->observation, "absent");
  EXPECT_GE(r->waited_ms, 150);
  EXPECT_GE(r->polls, 2);
  auto zero = RunLocally(FileExistsCheck(t.path + "/never"), milliseconds(0));
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->signalled);
  EXPECT_EQ(zero->polls, 1);  // a zero slice still looks once
}

TEST(RemoteWait, ASleepWithoutFractionsDoesNotMakeTheLoopSpin) {
  TempDir t;
  fs::create_directories(t.path + "/bin");
  {
    std::ofstream f(t.path + "/bin/sleep");
    f << "#!/bin/sh\ncase $1 in *.*) echo \"sleep: invalid time interval '$1'\" >&2; exit 1;; esac\nexec /bin/sleep \"$@\"\n";
  }
  fs::permissions(t.path + "/bin/sleep", fs::perms::owner_all);
  auto r = RunLocally(FileExistsCheck(t.path + "/never"), milliseconds(1500), t.path + "/bin:/usr/bin:/bin");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->signalled);
  EXPECT_GE(r->waited_ms, 1500);
  EXPECT_LE(r->polls, 4);  // one poll per whole second, not thousands
}

TEST(RemoteWait, ArgumentsTravelVerbatim) {
  TempDir t;
  const std::string odd = t.path + "/a b'$(touch pwned)`touch pwned2`\"";
  std::ofstream(odd) << "x";
  ASSERT_TRUE(fs::exists(odd));
  auto r = RunLocally(FileExistsCheck(odd), milliseconds(1000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signalled);
  EXPECT_FALSE(fs::exists("pwned"));
  EXPECT_FALSE(fs::exists("pwned2"));
}

TEST(RemoteWait, ParsingTheOutput) {
  auto r = ParseRemoteWait("npuprof-wait signal polls=3 waited_ms=42\nleader=alive log=ready\n");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->signalled);
  EXPECT_EQ(r->polls, 3);
  EXPECT_EQ(r->waited_ms, 42);
  EXPECT_EQ(r->observation, "leader=alive log=ready");
  // what an env script printed before the loop does not matter
  r = ParseRemoteWait("welcome\nnpuprof-wait timeout polls=9 waited_ms=1000\n\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->signalled);
  EXPECT_EQ(r->observation, "");
  for (const char* bad : {"", "polls=3\n", "npuprof-wait maybe polls=1 waited_ms=1\n", "xnpuprof-wait signal polls=1"})
    EXPECT_EQ(ParseRemoteWait(bad).status().code(), Code::kCorruption) << bad;
}

TEST(RemoteWait, TheReadinessCheckSeesTheStartUpLineOfAMarkedService) {
  TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  std::ofstream(rt + "/_start.sh") << "NPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\n";
  // The line comes well after the first poll, even on a loaded machine.
  const pid_t svc = Spawn("sleep 1.5; echo 'INFO:     Application startup complete.' >> '" + rt +
                              "/stderr.log'; exec sleep 60",
                          {"NPUPROF_SERVICE=r1/service-1"});
  auto r = RunLocally(service::ReadySignalCheck(svc, "r1/service-1", rt), milliseconds(20000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signalled);
  EXPECT_EQ(r->observation, "leader=alive log=ready");
  EXPECT_GT(r->polls, 1);
  // A slice that ends before the line: still starting.
  std::ofstream(rt + "/stderr.log", std::ios::trunc) << "INFO: loading weights\n";
  r = RunLocally(service::ReadySignalCheck(svc, "r1/service-1", rt), milliseconds(100));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->signalled);
  EXPECT_EQ(r->observation, "leader=alive log=starting");
  // Its death ends the wait at once.
  Reap(svc);
  r = RunLocally(service::ReadySignalCheck(svc, "r1/service-1", rt), milliseconds(20000));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->signalled);
  EXPECT_EQ(r->observation, "leader=gone");
  EXPECT_EQ(r->polls, 1);
}

TEST(RemoteWait, TheReadinessCheckEndsOnAPidThatIsNotTheService) {
  TempDir t;
  const std::string rt = t.path + "/r1/service-1";
  fs::create_directories(rt);
  std::ofstream(rt + "/_start.sh") << "NPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\n";
  std::ofstream(rt + "/stderr.log") << "INFO:     Application startup complete.\n";
  const pid_t other = Spawn("exec sleep 60", {"NPUPROF_SERVICE=r9/service-1"});
  auto r = RunLocally(service::ReadySignalCheck(other, "r1/service-1", rt), milliseconds(20000));
  Reap(other);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signalled);
  EXPECT_EQ(r->observation, "leader=foreign");
}

TEST(RemoteWait, TheStopCheckWaitsForTheWholeGroup) {
  // The leader exits at once; a member of its group lives on for a moment
  // (long enough that the first poll finds it even on a loaded machine).
  const pid_t leader = Spawn("(sleep 2) & exit 0", {});
  waitpid(leader, nullptr, 0);  // the leader is gone (reaped), its child still runs in the group
  auto r = RunLocally(service::GroupGoneCheck(leader), milliseconds(20000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->signalled);
  EXPECT_EQ(r->observation, "members=0");
  EXPECT_GT(r->polls, 1);
  // A group that stays: timeout, members counted.
  const pid_t stays = Spawn("exec sleep 60", {});
  r = RunLocally(service::GroupGoneCheck(stays), milliseconds(100));
  Reap(stays);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->signalled);
  EXPECT_EQ(r->observation, "leader=alive");
}

}  // namespace
}  // namespace npuprof::workers
