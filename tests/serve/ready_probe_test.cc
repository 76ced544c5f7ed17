// The readiness wait on the target (workers/handlers/ready_probe.h): its
// observation parser over well-formed and malformed outputs, and the check
// run locally with /bin/sh against a marked process that plays the service
// (a python3 HTTP server that binds its port late, prints the start-up line
// or not), so what the check reports is what that server really answered.
// The slice's tests run twice: with the shell loop's check and with the
// watcher that replaces it where python3 runs (ready_watch.h), which must
// report the same.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/ready_probe.h"
#include "workers/handlers/ready_watch.h"
#include "workers/remote_wait.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Obs = ReadyObservation;

TEST(ReadyObservation, ReadsEveryDescribedForm) {
  auto o = ParseReadyObservation("leader=gone");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->leader, Obs::Leader::kGone);
  o = ParseReadyObservation("leader=foreign");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->leader, Obs::Leader::kForeign);
  o = ParseReadyObservation("leader=alive hint=none");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->hint, "none");
  EXPECT_EQ(o->probe, Obs::Probe::kNone);
  o = ParseReadyObservation("leader=alive hint=port probes=1 probe=unavailable");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->probe, Obs::Probe::kUnavailable);
  EXPECT_EQ(o->probes, 1);
  o = ParseReadyObservation(
      R"(leader=alive hint=log probes=3 probe=yes {"health":200,"models":200,"ids":["m","x"],"error":""})");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->hint, "log");
  EXPECT_EQ(o->probes, 3);
  EXPECT_TRUE(o->probe_said_ready);
  EXPECT_EQ(o->ids, (std::vector<std::string>{"m", "x"}));
  EXPECT_TRUE(ProbeSaysReady(*o, "m"));
  EXPECT_FALSE(ProbeSaysReady(*o, "other"));  // the handler decides, not the probe's yes
  EXPECT_EQ(DescribeObservation(*o, "other"), R"(/v1/models answered 200 without 'other' (lists ["m","x"]))");
  o = ParseReadyObservation(
      R"(leader=alive hint=log probes=1 probe=no {"health":0,"models":0,"ids":[],"error":"ConnectionRefusedError: [Errno 111]"})");
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(ProbeSaysReady(*o, "m"));
  EXPECT_EQ(DescribeObservation(*o, "m"), "/health: ConnectionRefusedError: [Errno 111]");
  o = ParseReadyObservation(R"(leader=alive hint=port probes=2 probe=no {"health":503,"models":0,"ids":[],"error":""})");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(DescribeObservation(*o, "m"), "/health answered 503");
}

TEST(ReadyObservation, RefusesMalformedOutputsNamingWhatIsWrong) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "leader=gone|foreign|alive"},
      {"leader=gone extra", "leader=gone|foreign|alive"},
      {"leader=zombie", "leader=gone|foreign|alive"},
      {"leader=alive", "leader=gone|foreign|alive"},
      {"leader=alive hint=none probes=1", "hint=none is followed by more"},
      {"leader=alive hint=smoke probes=1 probe=unavailable", "the hint is not none, log or port"},
      {"leader=alive hint=log", "a hint without the probe's answer"},
      {"leader=alive hint=log probe=unavailable", "probes=<count>"},
      {"leader=alive hint=log probes=x probe=unavailable", "probes=<count>"},
      {"leader=alive hint=log probes=9999999 probe=unavailable", "probes=<count>"},
      {"leader=alive hint=log probes=1", "probes=<count>"},
      {"leader=alive hint=log probes=1 probe=maybe {}", "probe=unavailable|yes {...}|no {...}"},
      {"leader=alive hint=log probes=1 probe=yes {", "not JSON"},
      {"leader=alive hint=log probes=1 probe=yes []", "not an object"},
      {R"(leader=alive hint=log probes=1 probe=yes {"models":200,"ids":[],"error":""})", "'health'"},
      {R"(leader=alive hint=log probes=1 probe=yes {"health":"200","models":200,"ids":[],"error":""})", "'health'"},
      {R"(leader=alive hint=log probes=1 probe=yes {"health":200,"models":-1,"ids":[],"error":""})", "'models'"},
      {R"(leader=alive hint=log probes=1 probe=yes {"health":200,"models":1000,"ids":[],"error":""})", "'models'"},
      {R"(leader=alive hint=log probes=1 probe=yes {"health":200,"models":200,"ids":"m","error":""})", "'ids'"},
      {R"(leader=alive hint=log probes=1 probe=yes {"health":200,"models":200,"ids":[1],"error":""})", "an id"},
      {R"(leader=alive hint=log probes=1 probe=yes {"health":200,"models":200,"ids":[]})", "'error'"},
  };
  for (const auto& [text, why] : bad) {
    auto o = ParseReadyObservation(text);
    ASSERT_FALSE(o.ok()) << text;
    EXPECT_EQ(o.status().code(), Code::kCorruption) << text;
    EXPECT_NE(o.status().message().find(why), std::string::npos) << text << " -> " << o.status().message();
  }
  // Bytes that are not UTF-8 inside the answers are refused by the JSON reader, not a crash.
  EXPECT_FALSE(ParseReadyObservation(std::string("leader=alive hint=log probes=1 probe=no {\"e\":\"\xff\"}")).ok());
}

// A free TCP port on 127.0.0.1 (bound to 0 and closed again).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// The played service: a marked python3 process that sleeps `delay_s`,
// prints the start-up line to stderr.log when `line`, then serves /health
// and /v1/models (listing "m") on `port` until killed. The line comes once
// the port listens, or, with `line_first`, 0.3 s before it listens (so that
// a poll sees the line first whatever the load).
pid_t SpawnService(const std::string& rt, int port, double delay_s, bool line, bool line_first = false,
                   bool marked = true) {
  const std::string early =
      line_first ? "open(sys.argv[1] + '/stderr.log', 'a').write('INFO:     Application startup complete.\\n')\n"
                   "time.sleep(0.3)\n"
                 : "";
  if (line_first) line = false;
  const std::string py = "import http.server, json, sys, time\n"
                         "time.sleep(" + std::to_string(delay_s) + ")\n" + early +
                         "class H(http.server.BaseHTTPRequestHandler):\n"
                         "    def log_message(self, *a): pass\n"
                         "    def do_GET(self):\n"
                         "        b = b'' if self.path == '/health' else json.dumps({'data': [{'id': 'm'}]}).encode()\n"
                         "        self.send_response(200); self.send_header('Content-Length', str(len(b)))\n"
                         "        self.end_headers(); self.wfile.write(b)\n"
                         "s = http.server.HTTPServer(('127.0.0.1', " + std::to_string(port) + "), H)\n" +
                         (line ? "open(sys.argv[1] + '/stderr.log', 'a').write('INFO:     Application startup complete.\\n')\n"
                               : "") +
                         "s.serve_forever()\n";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    char* const envp[] = {const_cast<char*>(marked ? "NPUPROF_SERVICE=r1/service-1" : "NPUPROF_SERVICE=r9/service-1"),
                          const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    char* const argv[] = {const_cast<char*>("python3"), const_cast<char*>("-c"), const_cast<char*>(py.c_str()),
                          const_cast<char*>(rt.c_str()), nullptr};
    execve("/usr/bin/python3", argv, envp);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

struct Service {
  npuprof::testing::TempDir t;
  std::string rt;
  int port = FreePort();
  pid_t pid = -1;
  Service(double delay_s, bool line, bool line_first = false, bool marked = true) {
    rt = t.path + "/r1/service-1";
    fs::create_directories(rt);
    std::ofstream(rt + "/_start.sh") << "NPUPROF_SERVICE='r1/service-1'; export NPUPROF_SERVICE\n";
    pid = SpawnService(rt, port, delay_s, line, line_first, marked);
  }
  ~Service() { Kill(); }
  void Kill() {
    if (pid <= 0) return;
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  // The shell loop's check (ReadyProbeCheck), or the watcher (ready_watch.h).
  bool watcher = false;
  std::vector<std::string> Argv(milliseconds slice, const std::string& served, pid_t leader = 0) const {
    if (leader == 0) leader = pid;
    return watcher ? ReadyWatchArgv(leader, "r1/service-1", rt, port, served, slice)
                   : RemoteWaitArgv(ReadyProbeCheck(leader, "r1/service-1", rt, port, served), slice);
  }
  Result<Obs> Wait(milliseconds slice, const std::string& served = "m", const std::string& path_env = "") {
    const auto r = ssh::testing::RunLocalArgv(Argv(slice, served), "", path_env);
    if (r.status != 0) return Status::Io("the loop exited " + std::to_string(r.status) + ": " + r.err);
    auto w = ParseRemoteWait(r.out);
    if (!w.ok()) return w.status();
    return ParseReadyObservation(w->observation);
  }
};

// The slice watched by the shell loop (false) or by the watcher (true).
class ReadyWait : public ::testing::TestWithParam<bool> {};

TEST_P(ReadyWait, ASliceEndsWhenTheServiceAnswersAfterItsStartUpLine) {
  // The line before the listener: the hint is the line whatever the load
  // (a line written after the bind may be polled after the listener).
  Service svc(0.3, true, /*line_first=*/true);
  svc.watcher = GetParam();
  auto o = svc.Wait(milliseconds(20000));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->hint, "log");
  EXPECT_TRUE(ProbeSaysReady(*o, "m")) << DescribeObservation(*o, "m");
  EXPECT_EQ(o->ids, std::vector<std::string>{"m"});
}

TEST_P(ReadyWait, WithoutTheLineTheListenerIsTheHint) {
  Service svc(0.3, false);
  svc.watcher = GetParam();
  auto o = svc.Wait(milliseconds(20000));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->hint, "port");
  EXPECT_TRUE(ProbeSaysReady(*o, "m")) << DescribeObservation(*o, "m");
}

TEST_P(ReadyWait, NoHintNoProbeAndAnotherNameIsNotReady) {
  Service svc(30, false);  // neither line nor listener during the slice
  svc.watcher = GetParam();
  auto o = svc.Wait(milliseconds(300));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->hint, "none");
  EXPECT_EQ(o->probe, Obs::Probe::kNone);

  Service other(0, true);  // answers, but lists "m" only: the slice runs out, probing now and then
  other.watcher = GetParam();
  // wait until it serves (its line comes after the bind), so the slice's hint is certain
  for (int i = 0; i < 1000 && !fs::exists(other.rt + "/stderr.log"); ++i) usleep(20000);
  o = other.Wait(milliseconds(4000), "not-m");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->probe, Obs::Probe::kAnswered);
  EXPECT_FALSE(ProbeSaysReady(*o, "not-m"));
  EXPECT_GE(o->probes, 1);
  EXPECT_LE(o->probes, 10);  // spaced 100 ms doubling to 1 s, not one per poll (up to 80 polls)
}

TEST(ReadyProbeCheck, ATargetWithoutPython3SaysSoForTheSshFallback) {
  Service svc(0, true);
  npuprof::testing::TempDir bin;
  for (const char* tool : {"sh", "grep", "tr", "sleep", "printf"})
    fs::create_symlink(std::string("/usr/bin/") + tool, bin.path + "/" + tool);
  // wait until the line is there, so the hint is certain
  for (int i = 0; i < 1000 && !fs::exists(svc.rt + "/stderr.log"); ++i) usleep(20000);
  auto o = svc.Wait(milliseconds(20000), "m", bin.path);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->probe, Obs::Probe::kUnavailable);
}

TEST_P(ReadyWait, ADeadLeaderEndsTheSliceAtOnce) {
  Service svc(30, false);
  svc.watcher = GetParam();
  const pid_t pid = svc.pid;
  svc.Kill();
  const auto r = ssh::testing::RunLocalArgv(svc.Argv(milliseconds(20000), "m", pid), "");
  ASSERT_EQ(r.status, 0) << r.err;
  auto w = ParseRemoteWait(r.out);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->polls, 1);
  EXPECT_EQ(ParseReadyObservation(w->observation)->leader, Obs::Leader::kGone);
}

// A leader whose environment carries another service's marker is not
// this service: the slice ends at once, saying so.
TEST_P(ReadyWait, ALeaderWithoutTheMarkerIsForeign) {
  Service svc(30, false, false, /*marked=*/false);
  svc.watcher = GetParam();
  usleep(200000);  // its environment is the child's after the exec
  auto o = svc.Wait(milliseconds(20000));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->leader, Obs::Leader::kForeign);
}

// Where python3 cannot run, the watcher prints no remote wait's output
// (the handler then polls with the shell check, which says the probe is
// unavailable: ATargetWithoutPython3SaysSoForTheSshFallback).
TEST(ReadyWatch, ATargetWithoutPython3GivesNoWaitOutput) {
  Service svc(0, true);
  npuprof::testing::TempDir bin;
  fs::create_symlink("/usr/bin/sh", bin.path + "/sh");
  const auto r = ssh::testing::RunLocalArgv(
      ReadyWatchArgv(svc.pid, "r1/service-1", svc.rt, svc.port, "m", milliseconds(2000)), "", bin.path);
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(ParseRemoteWait(r.out).ok()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(ShellAndWatcher, ReadyWait, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "watcher" : "shell"; });

}  // namespace
}  // namespace npuprof::workers::service
