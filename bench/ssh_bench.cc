// Remote command round trip (`true`) against a real loopback sshd
// (tests/support/sshd_fixture), several ways:
//   BM_SshReusedSession  one SshSession, connected once, each command framed
//                        to the session's command shell (what workers do;
//                        workers/ssh/command_shell_protocol.h)
//   BM_SshReusedChannelPerCommand the same reused session with the command
//                        shell off: a new channel per command, so sshd starts
//                        the login shell (and its rc files) for each
//   BM_SshReusedSftpStat the same reused session, SFTP stat (no remote shell)
//   BM_SshNewSession     a new SshSession per command (connect, kex, auth,
//                        command shell start, command)
//   BM_SshSpawnPerCommand one `ssh -i KEY -o UserKnownHostsFile=KH -p PORT
//                        user@127.0.0.1 true` process per command (the one-shot
//                        script way; no ControlMaster, -F /dev/null so the
//                        user's ssh config does not change the figure)
// Each reports the median per-command time (median_ms); after the run the
// ratio spawn median / reused median is printed. Fixed iteration counts;
// --benchmark_min_time does not apply.
// Every way but the command shell pays the remote login shell's start-up per
// command (sshd runs `$SHELL -c CMD`, and bash sources ~/.bashrc when started
// by sshd); BM_LocalShellRc shows that cost locally.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/sshd_fixture.h"
#include "workers/ssh/ssh_session.h"

extern char** environ;

namespace npuprof::bench {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "ssh bench: %s\n", why.c_str());
  std::exit(2);
}

testing::SshdFixture* g_sshd = nullptr;
std::map<std::string, double> g_medians_ms;

testing::SshdFixture& Sshd() {
  if (!g_sshd) {
    g_sshd = new testing::SshdFixture();
    Status s = g_sshd->Start();
    if (!s.ok()) Die("sshd fixture: " + s.ToString());
  }
  return *g_sshd;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Report(benchmark::State& state, const std::string& name, const std::vector<double>& ms) {
  const double m = Median(ms);
  state.counters["median_ms"] = m;
  g_medians_ms[name] = m;
}

void RunTrue(ssh::SshSession& s) {
  auto r = s.Exec("true", std::chrono::seconds(10));
  if (!r.ok()) Die("exec: " + r.status().ToString());
  if (r->exit_status != 0) Die("remote `true` exited " + std::to_string(r->exit_status));
}

// `true` on one session connected once; command_shell off = a channel (and
// a login shell) per command, the way before the command shell.
void RunReused(benchmark::State& state, bool command_shell, const std::string& name) {
  ssh::SshTarget t = Sshd().target();
  t.command_shell = command_shell;
  ssh::SshSession session(t);
  if (Status s = session.Connect(); !s.ok()) Die("connect: " + s.ToString());
  RunTrue(session);  // warm
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    RunTrue(session);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  if (session.handshakes() != 1) Die("the session reconnected");
  Report(state, name, ms);
}

void BM_SshReusedSession(benchmark::State& state) { RunReused(state, true, "reused"); }
BENCHMARK(BM_SshReusedSession)->Iterations(50)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_SshReusedChannelPerCommand(benchmark::State& state) { RunReused(state, false, "channel_per_command"); }
BENCHMARK(BM_SshReusedChannelPerCommand)->Iterations(20)->UseRealTime()->Unit(benchmark::kMillisecond);

// A round trip on the reused session that starts no remote shell: SFTP stat
// (sshd's internal-sftp). Lower bound of what the SSH layer itself costs per
// request; an exec additionally makes sshd fork a session and start the shell.
void BM_SshReusedSftpStat(benchmark::State& state) {
  ssh::SshSession session(Sshd().target());
  if (Status s = session.Connect(); !s.ok()) Die("connect: " + s.ToString());
  if (!session.Stat("/").ok()) Die("sftp stat failed");  // warm: opens the SFTP subsystem
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    auto st = session.Stat("/");
    if (!st.ok()) Die("sftp stat: " + st.status().ToString());
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  Report(state, "sftp_stat", ms);
}
BENCHMARK(BM_SshReusedSftpStat)->Iterations(50)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_SshNewSession(benchmark::State& state) {
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    ssh::SshSession session(Sshd().target());
    RunTrue(session);
    session.Disconnect();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  Report(state, "new_session", ms);
}
BENCHMARK(BM_SshNewSession)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);

// Spawns argv (stdio to /dev/null) and waits; dies unless it exits 0.
class Spawner {
 public:
  explicit Spawner(std::vector<std::string> args) : args_(std::move(args)) {
    for (const auto& a : args_) argv_.push_back(const_cast<char*>(a.c_str()));
    argv_.push_back(nullptr);
    posix_spawn_file_actions_init(&fa_);
    posix_spawn_file_actions_addopen(&fa_, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa_, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa_, 2, "/dev/null", O_WRONLY, 0);
  }
  ~Spawner() { posix_spawn_file_actions_destroy(&fa_); }
  void Run() {
    pid_t pid = -1;
    if (posix_spawnp(&pid, argv_[0], &fa_, nullptr, argv_.data(), environ) != 0) Die("cannot spawn " + args_[0]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      Die(args_[0] + " failed (status " + std::to_string(st) + ")");
  }

 private:
  std::vector<std::string> args_;
  std::vector<char*> argv_;
  posix_spawn_file_actions_t fa_;
};

void BM_SshSpawnPerCommand(benchmark::State& state) {
  testing::SshdFixture& d = Sshd();
  Spawner ssh({"ssh",
               "-F", "/dev/null",
               "-i", d.identity_file(),
               "-o", "UserKnownHostsFile=" + d.known_hosts_file(),
               "-o", "StrictHostKeyChecking=yes",
               "-o", "BatchMode=yes",
               "-o", "IdentitiesOnly=yes",
               "-o", "LogLevel=ERROR",
               "-p", std::to_string(d.port()),
               d.user() + "@127.0.0.1",
               "true"});
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    ssh.Run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  Report(state, "spawn", ms);
}
BENCHMARK(BM_SshSpawnPerCommand)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);

// Not SSH: what the remote side pays per command before `true` runs when the
// login shell is bash and ~/.bashrc exists (bash started by sshd sources it).
// Local `bash -c '. ~/.bashrc; true'` as the same user; part of every figure above.
void BM_LocalShellRc(benchmark::State& state) {
  const char* home = std::getenv("HOME");
  const std::string rc = std::string(home ? home : "/nonexistent") + "/.bashrc";
  if (access(rc.c_str(), R_OK) != 0) {
    state.SkipWithError("no ~/.bashrc");
    for (auto _ : state) {
    }
    return;
  }
  Spawner bash({"bash", "-c", ". \"$HOME/.bashrc\" >/dev/null 2>&1; true"});
  std::vector<double> ms;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    bash.Run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  Report(state, "shell_rc", ms);
}
BENCHMARK(BM_LocalShellRc)->Iterations(10)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace npuprof::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  auto& m = npuprof::bench::g_medians_ms;
  if (m.count("reused") && m.count("spawn") && m["reused"] > 0) {
    std::printf("ssh_speedup spawn_median_ms=%.3f reused_median_ms=%.3f ratio=%.1fx\n", m["spawn"], m["reused"],
                m["spawn"] / m["reused"]);
  }
  if (m.count("channel_per_command") && m.count("spawn") && m["channel_per_command"] > 0) {
    std::printf("ssh_channel_per_command median_ms=%.3f spawn_ratio=%.1fx (command shell off)\n",
                m["channel_per_command"], m["spawn"] / m["channel_per_command"]);
  }
  if (m.count("reused") && m.count("new_session") && m["reused"] > 0) {
    std::printf("ssh_new_session new_session_median_ms=%.3f ratio_vs_reused=%.1fx\n", m["new_session"],
                m["new_session"] / m["reused"]);
  }
  if (m.count("sftp_stat")) {
    std::printf("ssh_no_shell reused_sftp_stat_median_ms=%.3f\n", m["sftp_stat"]);
  }
  if (m.count("shell_rc")) {
    std::printf("ssh_shell_rc local_bashrc_median_ms=%.3f (remote shell start-up, paid by every way above)\n",
                m["shell_rc"]);
  }
  delete npuprof::bench::g_sshd;  // stops sshd (only the processes it started) and removes its dir
  npuprof::bench::g_sshd = nullptr;
  benchmark::Shutdown();
  return 0;
}
