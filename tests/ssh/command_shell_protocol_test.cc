// The command shell protocol: framing and marker scanning (pure), and the
// driver script itself run by local shells (dash as /bin/sh, and bash) on
// frames from a file — no SSH involved.
#include "workers/ssh/command_shell_protocol.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/ssh/local_shell.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::ssh {
namespace {

const std::string kNonce = "0123456789abcdef0123456789abcdef";

TEST(CommandShellProtocol, FrameCarriesLengthNonceCommandAndTrailer) {
  const std::string f = CommandShellFrame("echo hi\nexit 3", kNonce);
  const std::string payload = "echo hi\nexit 3\n" + kNonce;
  EXPECT_EQ(f, std::to_string(payload.size()) + " " + kNonce + "\n" + payload);
}

TEST(CommandShellProtocol, StdoutMarkerFoundOnlyWhenComplete) {
  const std::string out = "line1\nno newline at end\n" + kNonce + ":17\n";
  auto m = FindStdoutMarker(out, kNonce);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(out.substr(0, m->begin), "line1\nno newline at end");
  EXPECT_EQ(m->end, out.size());
  EXPECT_EQ(m->exit_status, 17);
  // Cut anywhere inside the marker: not complete yet.
  for (size_t cut = out.size() - kNonce.size() - 4; cut < out.size(); ++cut) {
    EXPECT_FALSE(FindStdoutMarker(out.substr(0, cut), kNonce).has_value()) << cut;
  }
}

TEST(CommandShellProtocol, LookalikesAreNotMarkers) {
  // The nonce without the leading newline, without digits, or another nonce.
  EXPECT_FALSE(FindStdoutMarker(kNonce + ":0\n", kNonce));
  EXPECT_FALSE(FindStdoutMarker("\n" + kNonce + ":\n", kNonce));
  EXPECT_FALSE(FindStdoutMarker("\n" + kNonce + ":1x\n", kNonce));
  EXPECT_FALSE(FindStdoutMarker("\nffffffffffffffffffffffffffffffff:0\n", kNonce));
  // A lookalike first, then the real marker.
  const std::string out = "a\n" + kNonce + ":zz\nb\n" + kNonce + ":0\n";
  auto m = FindStdoutMarker(out, kNonce);
  ASSERT_TRUE(m);
  EXPECT_EQ(out.substr(0, m->begin), "a\n" + kNonce + ":zz\nb");
}

TEST(CommandShellProtocol, RescanFromOffsetFindsMarkerSplitAcrossChunks) {
  std::string acc = "data" + std::string("\n") + kNonce.substr(0, 10);
  EXPECT_FALSE(FindStdoutMarker(acc, kNonce));
  const size_t back = MaxMarkerSize(kNonce);
  const size_t from = acc.size() > back ? acc.size() - back : 0;
  acc += kNonce.substr(10) + ":0\n";
  auto m = FindStdoutMarker(acc, kNonce, from);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->begin, 4u);
}

TEST(CommandShellProtocol, StderrMarkerAndReadyLine) {
  EXPECT_EQ(FindStderrMarker("warn\n\n" + kNonce + "\n", kNonce), std::optional<size_t>(5));
  EXPECT_FALSE(FindStderrMarker("\n" + kNonce, kNonce));
  // rc-file noise before the ready line is skipped.
  auto pid = FindShellReady("Welcome!\nconda init\n\n" + kNonce + ":4242\n", kNonce);
  ASSERT_TRUE(pid);
  EXPECT_EQ(*pid, 4242);
  EXPECT_FALSE(FindShellReady("\n" + kNonce + ":42", kNonce));
}

// Found by fuzzing (tests/fuzz/command_shell_fuzz.cc): any digit run after
// the nonce was taken as the exit status (":4242" gave 4242, ":0000000000000000000000007"
// a marker longer than MaxMarkerSize, which a re-scan from
// size - MaxMarkerSize could miss), and a ready line with pid 0 was accepted
// (the kill script would then signal the tree below pid 0). The shell's $? is
// 0..255 in 1-3 digits and $$ is positive: anything else is no marker.
TEST(CommandShellProtocol, StatusAndPidOutsideTheirRangeAreNoMarkers) {
  EXPECT_FALSE(FindStdoutMarker("\n" + kNonce + ":256\n", kNonce));
  EXPECT_FALSE(FindStdoutMarker("\n" + kNonce + ":4242\n", kNonce));
  EXPECT_FALSE(FindStdoutMarker("\n" + kNonce + ":0000000000000000000000007\n", kNonce));
  auto m = FindStdoutMarker("x\n" + kNonce + ":4242\n\n" + kNonce + ":255\n", kNonce);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->exit_status, 255);
  EXPECT_EQ(m->begin, 1 + ("\n" + kNonce + ":4242\n").size());
  EXPECT_FALSE(FindShellReady("\n" + kNonce + ":0\n", kNonce));
  EXPECT_FALSE(FindShellReady("\n" + kNonce + ":99999999999999999999\n", kNonce));
  EXPECT_EQ(FindShellReady("\n" + kNonce + ":0\n\n" + kNonce + ":17\n", kNonce), std::optional<int64_t>(17));
}

// The kill script run locally on a real tree: a shell P waiting for two
// `sleep 30` children. TERM to everything below P lets P's `wait` return, so
// P itself (not signalled) exits soon; P's own status shows it was not killed.
TEST(CommandShellProtocol, KillScriptStopsEveryProcessBelowThePid) {
  pid_t p = ::fork();
  ASSERT_GE(p, 0);
  if (p == 0) {
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & sh -c 'sleep 30'; wait; exit 0", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::usleep(300 * 1000);  // let P start its children
  const std::string cmd = BuildCommand({"sh", "-c", KillCommandTreeScript(p)});
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  int st = 0;
  pid_t done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {
    done = ::waitpid(p, &st, WNOHANG);
    if (done == 0) ::usleep(50 * 1000);
  }
  if (done == 0) {
    ::kill(p, SIGKILL);
    ::waitpid(p, &st, 0);
    FAIL() << "the tree below " << p << " survived the kill script";
  }
  EXPECT_TRUE(WIFEXITED(st)) << "P itself must not be signalled";
}

// Runs `shell -c DRIVER` with stdin = `input`; returns stdout and stderr.
using Ran = testing::LocalRun;
Ran RunDriver(const std::string& shell, const std::string& input, const std::string& flags = "") {
  std::vector<std::string> argv = {shell};
  if (!flags.empty()) argv.push_back(flags);
  argv.push_back("-c");
  argv.push_back(CommandShellDriver("feedface"));
  return testing::RunLocalArgv(argv, input);
}

class DriverTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DriverTest, RunsFramesInOrderWithExactOutputAndStatus) {
  const std::string n1 = "aaaa1111", n2 = "bbbb2222", n3 = "cccc3333", n4 = "dddd4444";
  std::string input = CommandShellFrame("printf 'no newline'; echo oops >&2; exit 7", n1) +
                      CommandShellFrame("printf 'two\\n\\n\\n'\ncat; echo \"stdin was empty\"", n2) +
                      CommandShellFrame("if then fi", n3) +  // a syntax error stays contained
                      CommandShellFrame("echo $((6*7))", n4);
  Ran r = RunDriver(GetParam(), input);
  auto ready = FindShellReady(r.out, "feedface");
  ASSERT_TRUE(ready) << r.out;

  std::string rest = r.out, errs = r.err;
  struct Want {
    std::string nonce, out, err_has;
    int status;
  };
  for (const Want& w : std::vector<Want>{{n1, "no newline", "oops", 7},
                                         {n2, "two\n\n\nstdin was empty\n", "", 0},
                                         {n3, "", "", 2},
                                         {n4, "42\n", "", 0}}) {
    auto m = FindStdoutMarker(rest, w.nonce);
    ASSERT_TRUE(m) << w.nonce << " in " << rest;
    auto e = FindStderrMarker(errs, w.nonce);
    ASSERT_TRUE(e) << w.nonce << " in " << errs;
    std::string got = rest.substr(0, m->begin);
    if (w.nonce == n1) got = got.substr(got.rfind('\n') + 1);  // after the ready line
    EXPECT_EQ(got, w.out);
    if (w.nonce == n3) {
      EXPECT_NE(m->exit_status, 0);  // the shell's syntax error status
    } else {
      EXPECT_EQ(m->exit_status, w.status) << w.nonce;
    }
    EXPECT_NE(errs.substr(0, *e).find(w.err_has), std::string::npos);
    rest = rest.substr(m->end);
    errs = errs.substr(*e + w.nonce.size() + 2);
  }
  EXPECT_EQ(rest, "");
}

TEST_P(DriverTest, FrameCutShortNeverRuns) {
  const auto marker = std::filesystem::temp_directory_path() / "npuprof_cs_cut_marker";
  std::filesystem::remove(marker);
  std::string full = CommandShellFrame("touch " + ShellQuote(marker.string()) + "; echo ran", "ab12");
  Ran r = RunDriver(GetParam(), full.substr(0, full.size() - 2));  // the connection died
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_EQ(r.out.find("ran"), std::string::npos);
}

TEST_P(DriverTest, ErrexitAndNounsetFromAnRcFileDoNotEndTheDriver) {
  std::string input = CommandShellFrame("false", "e1e1") + CommandShellFrame("echo $unset_var; echo next", "e2e2");
  Ran r = RunDriver(GetParam(), input, "-eu");
  auto m1 = FindStdoutMarker(r.out, "e1e1");
  ASSERT_TRUE(m1) << r.out << r.err;
  EXPECT_EQ(m1->exit_status, 1);
  auto m2 = FindStdoutMarker(r.out, "e2e2");
  ASSERT_TRUE(m2) << r.out << r.err;
  EXPECT_EQ(r.out.substr(m1->end, m2->begin - m1->end), "\nnext\n");
}

INSTANTIATE_TEST_SUITE_P(Shells, DriverTest, ::testing::Values("sh", "bash"));

}  // namespace
}  // namespace npuprof::ssh
