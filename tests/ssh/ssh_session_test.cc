// SshSession against a real loopback sshd: exec, reuse, host keys, auth,
// reconnect after a killed connection, env script, pool.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "tests/support/sshd_test.h"
#include "workers/ssh/output_cap.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_pool.h"
#include "workers/ssh/ssh_session.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::ssh {
namespace {

using namespace std::chrono_literals;

bool Exists(const std::string& p) { return std::filesystem::exists(p); }

void WaitGone(pid_t pid) {
  for (int i = 0; i < 300 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(10ms);
}

// After a timed-out command: the next command runs on the same connection.
void ExpectUsableOnTheSameConnection(SshSession& s) {
  auto r = s.Exec("echo again", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "again\n");
  EXPECT_EQ(s.handshakes(), 1);
}

class SshSessionTest : public npuprof::testing::SshdTest {};

TEST_F(SshSessionTest, ExitCodesStdoutStderr) {
  SshSession s(sshd_.target());
  auto r = s.Exec("echo out; echo err >&2; exit 3", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_status, 3);
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_FALSE(r->timed_out);
  r = s.Exec("true", 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_status, 0);
  EXPECT_TRUE(s.host_key_fingerprint().has_value());
  EXPECT_EQ(s.host_key_fingerprint()->rfind("SHA256:", 0), 0u);
}

// ExecInCommandShell: the command (and what it exports) goes through the
// command shell's stdin, never as an exec request's text; without a command
// shell nothing runs at all.
TEST_F(SshSessionTest, ExecInCommandShellRunsInTheShellOrNotAtAll) {
  SshSession s(sshd_.target());
  auto r = s.ExecInCommandShell(
      BuildRemoteScript("", {{"NPUPROF_T", "it's\nprivate"}}, {"sh", "-c", "printf %s \"$NPUPROF_T\""}), 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_status, 0);
  EXPECT_EQ(r->stdout_data, "it's\nprivate");
  SshTarget no_shell = sshd_.target();
  no_shell.command_shell = false;
  SshSession plain(no_shell);
  const std::string mark = sshd_.dir() + "/ran";
  auto n = plain.ExecInCommandShell(BuildCommand({"touch", mark}), 10s);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(mark));
}

TEST_F(SshSessionTest, StdinAndLargeOutput) {
  SshSession s(sshd_.target());
  auto r = s.Exec("cat", 10s, "hello\nworld");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "hello\nworld");
  std::string big(300000, 'x');
  r = s.Exec("wc -c", 10s, big);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::stoul(r->stdout_data), big.size());
  r = s.Exec("head -c 3000000 /dev/zero; head -c 1000000 /dev/zero >&2", 20s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data.size(), 3000000u);
  EXPECT_EQ(r->stderr_data.size(), 1000000u);
}

TEST_F(SshSessionTest, TimeoutClosesChannelAndSessionStaysUsable) {
  SshSession s(sshd_.target());
  auto t0 = std::chrono::steady_clock::now();
  auto r = s.Exec("echo started; sleep 30", 700ms);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "started\n");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(s.last_error_kind(), SshErrorKind::kTimeout);
  ExpectUsableOnTheSameConnection(s);
}

TEST_F(SshSessionTest, FiftyCommandsOneHandshake) {
  SshSession s(sshd_.target());
  size_t max_children = 0;
  for (int i = 0; i < 50; ++i) {
    auto r = s.Exec(BuildCommand({"echo", std::to_string(i)}), 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, std::to_string(i) + "\n");
    max_children = std::max(max_children, sshd_.ChildPids().size());
  }
  EXPECT_EQ(s.handshakes(), 1);
  EXPECT_EQ(s.commands(), 50);
  EXPECT_EQ(max_children, 1u);  // one connection seen by sshd
  EXPECT_EQ(sshd_.ChildPids().size(), 1u);
}

TEST_F(SshSessionTest, UnknownHostKeyRefusedWithClearMessage) {
  SshTarget t = sshd_.target();
  t.known_hosts_file = sshd_.dir() + "/empty_known_hosts";
  std::ofstream(t.known_hosts_file).close();
  SshSession s(t);
  const std::string marker = sshd_.dir() + "/marker";
  auto r = s.Exec(BuildCommand({"touch", marker}), 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kHostKeyUnknown);
  EXPECT_EQ(s.last_error_kind(), SshErrorKind::kHostKeyUnknown);
  EXPECT_NE(r.status().message().find("is not in " + t.known_hosts_file), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("--accept-new-host-key"), std::string::npos);
  EXPECT_FALSE(Exists(marker));
}

TEST_F(SshSessionTest, AcceptNewRecordsFingerprintThenStrictWorks) {
  SshTarget t = sshd_.target();
  t.known_hosts_file = sshd_.dir() + "/new_known_hosts";  // does not exist yet
  t.host_key_policy = HostKeyPolicy::kAcceptNew;
  std::string fp;
  {
    SshSession s(t);
    auto r = s.Exec("echo ok", 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(s.accepted_new_fingerprint().has_value());
    fp = *s.accepted_new_fingerprint();
    EXPECT_EQ(fp.rfind("SHA256:", 0), 0u);
    EXPECT_EQ(fp, s.host_key_fingerprint().value_or(""));
  }
  t.host_key_policy = HostKeyPolicy::kStrict;
  SshSession strict(t);
  auto r = strict.Exec("echo ok", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(strict.accepted_new_fingerprint().has_value());
  EXPECT_EQ(strict.host_key_fingerprint().value_or(""), fp);
}

TEST_F(SshSessionTest, HostKeyMismatchRefusedAndNothingExecuted) {
  SshSession s(sshd_.target());
  ASSERT_TRUE(s.Exec("true", 10s).ok());
  ASSERT_TRUE(sshd_.RestartWithNewHostKey().ok());
  const std::string marker = sshd_.dir() + "/marker";
  SshSession fresh(sshd_.target());
  for (SshSession* session : {&s, &fresh}) {
    auto r = session->Exec(BuildCommand({"touch", marker}), 10s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
    EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kHostKeyMismatch);
    EXPECT_NE(r.status().message().find("HOST KEY MISMATCH"), std::string::npos);
  }
  EXPECT_FALSE(Exists(marker));
  // The accept_new policy must not paper over a changed key either.
  SshTarget t = sshd_.target();
  t.host_key_policy = HostKeyPolicy::kAcceptNew;
  SshSession accept(t);
  auto r = accept.Exec(BuildCommand({"touch", marker}), 10s);
  EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kHostKeyMismatch);
  EXPECT_FALSE(Exists(marker));
}

TEST_F(SshSessionTest, WrongKeyIsAuthFailed) {
  const std::string wrong = sshd_.dir() + "/wrong_key";
  ASSERT_EQ(npuprof::testing::RunLocal(
                {"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrong}),
            0);
  SshTarget t = sshd_.target();
  t.identity_file = wrong;
  SshSession s(t);
  auto r = s.Exec("true", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kAuthFailed) << r.status().message();
  t.identity_file = sshd_.dir() + "/no_such_key";
  SshSession s2(t);
  EXPECT_EQ(ErrorKindOf(s2.Exec("true", 10s).status()), SshErrorKind::kAuthFailed);
}

TEST_F(SshSessionTest, UnreachableIsRetryableUnavailable) {
  SshTarget t = sshd_.target();
  t.port = npuprof::testing::FreeLoopbackPort();
  SshSession s(t);
  auto r = s.Exec("true", 10s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kUnreachable);
}

TEST_F(SshSessionTest, KilledConnectionReconnectsOnNextExec) {
  SshSession s(sshd_.target());
  ASSERT_TRUE(s.Exec("true", 10s).ok());
  auto children = sshd_.ChildPids();
  ASSERT_EQ(children.size(), 1u);
  ::kill(children[0], SIGKILL);
  WaitGone(children[0]);
  auto r = s.Exec("echo back", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "back\n");
  EXPECT_EQ(s.handshakes(), 2);
  auto now = sshd_.ChildPids();
  ASSERT_EQ(now.size(), 1u);
  EXPECT_NE(now[0], children[0]);
}

TEST_F(SshSessionTest, DeathMidCommandIsConnectionLost) {
  SshSession s(sshd_.target());
  ASSERT_TRUE(s.Exec("true", 10s).ok());
  auto children = sshd_.ChildPids();
  ASSERT_EQ(children.size(), 1u);
  std::thread killer([&] {
    std::this_thread::sleep_for(500ms);
    ::kill(children[0], SIGKILL);
  });
  const std::string pid_file = sshd_.dir() + "/cmd.pid";
  auto r = s.Exec(BuildCommand({"sh", "-c", "echo $$ > \"$1\"; exec sleep 20", "sh", pid_file}), 30s);
  killer.join();
  {
    // The orphaned remote command outlives its killed sshd parent: stop it.
    std::ifstream in(pid_file);
    pid_t cmd_pid = 0;
    if (in >> cmd_pid && cmd_pid > 0) ::kill(cmd_pid, SIGKILL);
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kConnectionLost) << r.status().message();
  auto again = s.Exec("echo ok", 10s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(s.handshakes(), 2);
}

TEST_F(SshSessionTest, EnvScriptSourcedWithQuotedValues) {
  const std::string bin = sshd_.dir() + "/fake bin";
  std::filesystem::create_directories(bin);
  {
    std::ofstream tool(bin + "/npu-smi");
    tool << "#!/bin/sh\necho \"fake npu-smi $*\"\n";
  }
  ::chmod((bin + "/npu-smi").c_str(), 0755);
  std::string env = npuprof::testing::WriteEnvScript(
      sshd_.dir(), {"export PATH=" + ShellQuote(bin) + ":$PATH",
                    "export SIM_GREETING=" + ShellQuote("it's \"sim\" $HOME"),
                    "echo this noise must not reach stdout"});
  SshSession s(sshd_.target());
  const std::string value = "a'b\"c $X `id` $(id)\nline2";
  auto r = s.Exec(BuildRemoteScript(env, {{"VAL", value}},
                                    {"sh", "-c", "printf '%s|%s|' \"$SIM_GREETING\" \"$VAL\"; "
                                                 "npu-smi info -t 'x y'"}),
                  10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_status, 0) << r->stderr_data;
  EXPECT_EQ(r->stdout_data, "it's \"sim\" $HOME|" + value + "|fake npu-smi info -t x y\n");
}

// The machine's env script is sourced once per connection by the command
// shell, not once per command; a command on its own channel (stdin data, or
// no command shell) still sources it itself.
TEST_F(SshSessionTest, EnvScriptIsSourcedOncePerCommandShell) {
  const std::string count = sshd_.dir() + "/env_sourced";
  std::string env = npuprof::testing::WriteEnvScript(
      sshd_.dir(), {"echo x >> " + ShellQuote(count), "export SIM_FROM_ENV=yes"});
  auto sourced = [&] {
    std::ifstream f(count);
    return static_cast<int>(std::count(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>(), '\n'));
  };
  SshTarget t = sshd_.target();
  t.env_script = env;
  SshSession s(t);
  for (int i = 0; i < 3; ++i) {
    auto r = s.Exec(BuildRemoteScript(env, {}, {"sh", "-c", "printf %s \"$SIM_FROM_ENV\""}), 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, "yes");
  }
  EXPECT_EQ(sourced(), 1) << "three commands through one command shell";
  auto with_stdin = s.Exec(BuildRemoteScript(env, {}, {"sh", "-c", "cat >/dev/null; printf %s \"$SIM_FROM_ENV\""}),
                           10s, "data");
  ASSERT_TRUE(with_stdin.ok()) << with_stdin.status().ToString();
  EXPECT_EQ(with_stdin->stdout_data, "yes");
  EXPECT_EQ(sourced(), 2) << "its own channel sources it itself";
  SshTarget no_shell = t;
  no_shell.command_shell = false;
  SshSession plain(no_shell);
  for (int i = 0; i < 2; ++i) {
    auto r = plain.Exec(BuildRemoteScript(env, {}, {"sh", "-c", "printf %s \"$SIM_FROM_ENV\""}), 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, "yes");
  }
  EXPECT_EQ(sourced(), 4) << "no command shell: once per command";
}

TEST_F(SshSessionTest, PoolSharesOneSessionPerTarget) {
  SshPool pool;
  auto a = pool.Get(sshd_.target());
  auto b = pool.Get(sshd_.target());
  EXPECT_EQ(a.get(), b.get());
  SshTarget other = sshd_.target();
  other.known_hosts_file = sshd_.known_hosts_file() + ".copy";
  std::filesystem::copy_file(sshd_.known_hosts_file(), other.known_hosts_file);
  auto c = pool.Get(other);
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(pool.sessions(), 2u);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 5; ++j) {
        auto r = pool.Get(sshd_.target())->Exec(BuildCommand({"echo", std::to_string(i)}), 10s);
        EXPECT_TRUE(r.ok() && r->stdout_data == std::to_string(i) + "\n");
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(c->Exec("true", 10s).ok());
  EXPECT_EQ(pool.total_handshakes(), 2);
}

TEST_F(SshSessionTest, PoolLendsExclusiveSessionsAndTakesThemBack) {
  SshPool pool;
  const SshSession* first = nullptr;
  int64_t handshakes = 0;
  {
    auto a = pool.Acquire(sshd_.target());
    auto b = pool.Acquire(sshd_.target());
    EXPECT_NE(a.get(), b.get()) << "two holders at once get two sessions";
    EXPECT_NE(a.get(), pool.Get(sshd_.target()).get()) << "a lent session is nobody else's";
    EXPECT_NE(b.get(), pool.Get(sshd_.target()).get()) << "a lent session is nobody else's";
    ASSERT_TRUE(a->Exec("true", 10s).ok());
    ASSERT_TRUE(b->Exec("true", 10s).ok());
    first = a.get();
    handshakes = a->handshakes() + b->handshakes();
  }
  EXPECT_EQ(handshakes, 2);
  // Given back: the next holders reuse those connections, no new handshake.
  for (int i = 0; i < 3; ++i) {
    auto again = pool.Acquire(sshd_.target());
    EXPECT_TRUE(again.get() == first || i > 0);
    auto r = again->Exec(BuildCommand({"echo", "x"}), 10s);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(again->handshakes(), 1);
  }
}

// A cold worker: short calls on the shared session, then a long call, then
// short calls again, one after the other, cost one connection in all.
TEST_F(SshSessionTest, PoolLendsTheSharedSessionWhenNobodyHoldsIt) {
  SshPool pool;
  const SshSession* shared = nullptr;
  {
    auto s = pool.Get(sshd_.target());
    ASSERT_TRUE(s->Exec("true", 10s).ok());
    shared = s.get();
  }
  {
    auto lent = pool.Acquire(sshd_.target());
    EXPECT_EQ(lent.get(), shared) << "nobody held the shared session: it is lent, no new connection";
    ASSERT_TRUE(lent->Exec("true", 10s).ok());
  }
  auto again = pool.Get(sshd_.target());
  EXPECT_EQ(again.get(), shared);
  ASSERT_TRUE(again->Exec("true", 10s).ok());
  EXPECT_EQ(pool.total_handshakes(), 1);
  EXPECT_EQ(pool.connections(), 1u);
}

// Two things at once still get two connections: a Get() holder keeps the
// shared session from being lent, and a lent shared session makes Get() hand
// out another one.
TEST_F(SshSessionTest, PoolOpensASecondConnectionOnlyForConcurrentUse) {
  SshPool pool;
  auto held = pool.Get(sshd_.target());
  {
    auto lent = pool.Acquire(sshd_.target());
    EXPECT_NE(lent.get(), held.get()) << "the shared session is in use: the long call gets its own";
    ASSERT_TRUE(lent->Exec("true", 10s).ok());
  }
  ASSERT_TRUE(held->Exec("true", 10s).ok());
  held.reset();
  EXPECT_EQ(pool.connections(), 2u);
  {
    auto lent = pool.Acquire(sshd_.target());  // the shared one (first, nobody holds it)
    auto other = pool.Get(sshd_.target());
    EXPECT_NE(lent.get(), other.get()) << "while the shared session is lent, Get() hands out another";
    ASSERT_TRUE(other->Exec("true", 10s).ok());
    ASSERT_TRUE(lent->Exec("true", 10s).ok());
  }
  EXPECT_EQ(pool.total_handshakes(), 2) << "the second connection was reused, not a third opened";
}

// The workers' pool (Options::warm_spare): a long call that takes the last
// free session has a spare warmed beside it, so the short call that follows
// at once pays no handshake, and no third connection is opened for it.
TEST_F(SshSessionTest, PoolWarmsASpareBesideALongCallAndTheCallBesideItPaysNoHandshake) {
  SshPool pool(SshPool::Options{.warm_spare = true});
  {
    auto s = pool.Get(sshd_.target());
    ASSERT_TRUE(s->Exec("true", 10s).ok());
  }
  EXPECT_EQ(pool.connections(), 1u) << "short calls alone warm nothing";
  {
    auto lent = pool.Acquire(sshd_.target());
    pool.WaitForWarmUps();
    EXPECT_EQ(pool.connections(), 2u) << "the long call took the only session: a spare was warmed";
    auto beside = pool.Get(sshd_.target());
    EXPECT_NE(beside.get(), lent.get());
    EXPECT_EQ(beside->handshakes(), 1) << "the spare was connected before its first user came";
    SshStatsScope scope;
    auto r = beside->Exec(BuildCommand({"echo", "beside"}), 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, "beside\n");
    const SshStats d = scope.totals();
    EXPECT_EQ(d.handshakes, 0) << "the call beside the long one paid no handshake";
    EXPECT_EQ(d.shell_channels, 0) << "the spare's command shell was started by the warm-up";
    ASSERT_TRUE(lent->Exec("true", 10s).ok());
  }
  {
    auto a = pool.Acquire(sshd_.target());
    auto b = pool.Acquire(sshd_.target());
    pool.WaitForWarmUps();
    EXPECT_NE(a.get(), b.get());
  }
  EXPECT_EQ(pool.connections(), 2u) << "at most kSpareUpTo sessions are warmed ahead; two long calls reuse them";
  EXPECT_EQ(pool.total_handshakes(), 2);
}

// A spare that cannot connect is left unconnected and fails nobody: its
// first user connects it (and sees that connection's own error).
TEST_F(SshSessionTest, PoolSpareThatCannotConnectFailsNobody) {
  SshPool pool(SshPool::Options{.warm_spare = true});
  SshTarget closed = sshd_.target();
  closed.port = 1;  // nothing listens on 127.0.0.1:1
  {
    auto lent = pool.Acquire(closed);
    pool.WaitForWarmUps();
    EXPECT_EQ(pool.connections(), 2u);
    auto beside = pool.Get(closed);
    auto r = beside->Exec("true", 10s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(ErrorKindOf(r.status()), SshErrorKind::kUnreachable) << r.status().ToString();
  }
}

// --- the command shell (workers/ssh/command_shell_protocol.h) ---

TEST_F(SshSessionTest, CommandShellRunsCommandsWithoutChannelsOrShellStartups) {
  SshSession s(sshd_.target());
  const SshStats before = ProcessSshStats();
  for (int i = 0; i < 30; ++i) {
    auto r = s.Exec(BuildCommand({"echo", std::to_string(i)}), 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_data, std::to_string(i) + "\n");
  }
  const SshStats d = ProcessSshStats() - before;
  EXPECT_EQ(d.commands, 30);
  EXPECT_EQ(d.shell_channels, 1);
  EXPECT_EQ(d.exec_channels, 0);
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_F(SshSessionTest, CommandShellOutputIsByteExact) {
  SshSession s(sshd_.target());
  auto r = s.Exec("printf 'a\\000b\\nno newline'; printf 'e1\\n\\n' >&2; exit 5", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, std::string("a\0b\nno newline", 14));
  EXPECT_EQ(r->stderr_data, "e1\n\n");
  EXPECT_EQ(r->exit_status, 5);
  // A command's exit, cd, variables and a syntax error do not leak into the next.
  auto home = s.Exec("pwd", 10s);
  ASSERT_TRUE(home.ok());
  ASSERT_NE(home->stdout_data, "/\n");
  ASSERT_TRUE(s.Exec("cd /; X=1; exit 0", 10s).ok());
  r = s.Exec("if then", 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->exit_status, 0);
  r = s.Exec("pwd; echo \"x=${X:-unset}\"; cat", 10s);  // stdin is /dev/null
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, home->stdout_data + "x=unset\n");
}

TEST_F(SshSessionTest, CommandShellTimeoutStopsTheWholeCommandTree) {
  SshSession s(sshd_.target());
  const std::string pid_file = sshd_.dir() + "/child.pid";
  auto r = s.Exec(BuildCommand({"sh", "-c", "sleep 30 & echo $! > \"$1\"; echo started; wait",
                                "sh", pid_file}),
                  800ms);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->stdout_data, "started\n");
  pid_t child = 0;
  std::ifstream(pid_file) >> child;
  ASSERT_GT(child, 0);
  WaitGone(child);
  EXPECT_NE(::kill(child, 0), 0) << "the grandchild `sleep 30` survived the timeout";
  ExpectUsableOnTheSameConnection(s);
}

TEST_F(SshSessionTest, CommandShellThatDiedIsRestartedBeforeTheNextCommand) {
  SshSession s(sshd_.target());
  auto r = s.Exec("echo $$", 10s);  // the driver's pid (commands run in its subshells)
  ASSERT_TRUE(r.ok());
  const pid_t driver = std::stoi(r->stdout_data);
  ASSERT_EQ(::kill(driver, SIGKILL), 0);
  WaitGone(driver);
  std::this_thread::sleep_for(200ms);  // the channel's EOF/CLOSE reaches the client
  const SshStats before = ProcessSshStats();
  r = s.Exec("echo fine", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "fine\n");
  EXPECT_EQ((ProcessSshStats() - before).shell_channels, 1);
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_F(SshSessionTest, ChannelPerCommandWhenTheCommandShellIsOff) {
  SshTarget t = sshd_.target();
  t.command_shell = false;
  SshSession s(t);
  const SshStats before = ProcessSshStats();
  auto r = s.Exec("echo out; echo err >&2; exit 3", 10s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stdout_data, "out\n");
  EXPECT_EQ(r->stderr_data, "err\n");
  EXPECT_EQ(r->exit_status, 3);
  const SshStats d = ProcessSshStats() - before;
  EXPECT_EQ(d.exec_channels, 1);
  EXPECT_EQ(d.shell_channels, 0);
}

std::string Seq(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += std::to_string(i) + "\n";
  return s;
}

TEST_F(SshSessionTest, OutputPastTheCapKeepsHeadAndTailOnBothPaths) {
  const size_t cap = 65536;
  const std::string out = Seq(200000), err = Seq(50000);
  auto capped = [&](const std::string& full) {
    return full.substr(0, cap / 2) + OmittedMarker(full.size() - cap) + full.substr(full.size() - cap / 2);
  };
  for (bool shell : {true, false}) {
    SshTarget t = sshd_.target();
    t.command_shell = shell;
    SshSession s(t);
    auto r = s.Exec("seq 1 200000; seq 1 50000 >&2; exit 4", 30s, {}, cap);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_status, 4) << shell;
    EXPECT_EQ(r->stdout_omitted, out.size() - cap);
    EXPECT_EQ(r->stderr_omitted, err.size() - cap);
    EXPECT_TRUE(r->stdout_data == capped(out)) << shell;
    EXPECT_TRUE(r->stderr_data == capped(err)) << shell;
    // Within the cap: exact, on the same connection.
    auto small = s.Exec("seq 1 1000", 10s, {}, cap);
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(small->stdout_data, Seq(1000));
    EXPECT_EQ(small->stdout_omitted, 0u);
    EXPECT_EQ(s.handshakes(), 1);
  }
}

}  // namespace
}  // namespace npuprof::ssh
