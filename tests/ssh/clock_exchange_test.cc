// SshSession::ClockExchange against a real loopback sshd: every method
// answers with this host's own clock (the sshd runs here, so the offset is 0
// to within half the round trip), SFTP is not needed, and a loop that answers
// garbage, too much, nothing or dies is refused naming what happened, with
// the connection still usable afterwards.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "tests/support/sshd_test.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

using namespace std::chrono_literals;
using npuprof::testing::SshdFixture;

class ClockExchangeTest : public npuprof::testing::SshdTest {
 protected:
  // A target whose env script puts `tool` (a sh script body) first on PATH.
  SshTarget WithFake(const std::string& tool, const std::string& body) {
    const std::string bin = sshd_.dir() + "/fakebin";
    ::mkdir(bin.c_str(), 0755);
    {
      std::ofstream f(bin + "/" + tool, std::ios::trunc);
      f << "#!/bin/sh\n" << body << "\n";
    }
    ::chmod((bin + "/" + tool).c_str(), 0755);
    SshTarget t = sshd_.target();
    t.env_script = npuprof::testing::WriteEnvScript(sshd_.dir(), {"export PATH=" + ShellQuote(bin) + ":\"$PATH\""});
    return t;
  }
  // Every sample: ordered, and this host's clock within half its round trip (+1 ms).
  static void ExpectSane(const std::vector<ClockSample>& got, ClockMethod method) {
    for (const ClockSample& s : got) {
      EXPECT_EQ(s.method, method);
      EXPECT_LE(s.t0_us, s.t1_us);
      const double mid_ns = (static_cast<double>(s.t0_us) + static_cast<double>(s.t1_us)) * 500.0;
      const double half_rtt_ns = static_cast<double>(s.t1_us - s.t0_us) * 500.0;
      EXPECT_LE(std::abs(static_cast<double>(s.remote_ns) - mid_ns), half_rtt_ns + 1e6)
          << ClockMethodName(method) << " t0 " << s.t0_us << " remote " << s.remote_ns << " t1 " << s.t1_us;
    }
    auto e = BestClockEstimate(got);
    ASSERT_TRUE(e.has_value());
    EXPECT_LE(std::abs(e->offset_ms), e->uncertainty_ms + 1.0) << ClockMethodName(method);
  }
};

TEST_F(ClockExchangeTest, AutoAnswersWithThisHostsClockOnOneChannel) {
  SshSession s(sshd_.target());
  auto got = s.ClockExchange(9, 10s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 9u);
  ExpectSane(*got, (*got)[0].method);
  EXPECT_NE((*got)[0].method, ClockMethod::kDate) << "python3 or bash is on the loopback sshd's PATH";
  EXPECT_EQ(s.commands(), 1) << "one channel for every sample";
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_F(ClockExchangeTest, EachMethodWhenAskedFor) {
  SshSession s(sshd_.target());
  for (ClockMethod m : {ClockMethod::kPython, ClockMethod::kBash, ClockMethod::kDate}) {
    auto got = s.ClockExchange(4, 10s, m);
    ASSERT_TRUE(got.ok()) << ClockMethodName(m) << ": " << got.status().ToString();
    ASSERT_EQ(got->size(), 4u);
    ExpectSane(*got, m);
  }
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_F(ClockExchangeTest, WorksWhereSftpIsRefused) {
  SshdFixture no_sftp;
  no_sftp.set_sftp_subsystem(false);
  ASSERT_TRUE(no_sftp.Start().ok());
  SshSession s(no_sftp.target());
  auto got = s.ClockExchange(3, 10s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSane(*got, (*got)[0].method);
}

TEST_F(ClockExchangeTest, ThroughTheMachinesEnvScript) {
  // The env script's PATH decides which python3 answers.
  SshSession s(WithFake("python3", "printf '\\n%s python\\n' \"$3\"; while IFS= read -r l; do date +%s%N; done"));
  auto got = s.ClockExchange(3, 10s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSane(*got, ClockMethod::kPython);
}

TEST_F(ClockExchangeTest, GarbageIsRefusedShowingWhatCameBack) {
  SshSession s(WithFake("python3", "printf '\\n%s python\\n' \"$3\"; while IFS= read -r l; do printf 'garbage\\001\\n'; done"));
  auto got = s.ClockExchange(3, 10s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(ErrorKindOf(got.status()), SshErrorKind::kRemoteError) << got.status().ToString();
  EXPECT_NE(got.status().message().find("'garbage\\x01'"), std::string::npos) << got.status().message();
  // The channel was closed: the connection still runs commands.
  auto r = s.Exec("echo again", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_data, "again\n");
  EXPECT_EQ(s.handshakes(), 1);
}

TEST_F(ClockExchangeTest, ADateWithoutNanosecondsIsRefused) {
  SshSession s(WithFake("date", "echo 1796558249N"));
  auto got = s.ClockExchange(3, 10s, ClockMethod::kDate);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("not nanoseconds since the epoch: '1796558249N'"), std::string::npos)
      << got.status().message();
}

TEST_F(ClockExchangeTest, AnOverlongLineIsRefusedWithoutReadingItAll) {
  SshSession s(WithFake("python3", "printf '\\n%s python\\n' \"$3\"; while IFS= read -r l; do "
                                   "head -c 100000 /dev/zero | tr '\\0' 7; echo; done"));
  auto got = s.ClockExchange(3, 10s);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("longer than 64 bytes"), std::string::npos) << got.status().message();
}

TEST_F(ClockExchangeTest, ALoopThatNeverAnswersTimesOut) {
  SshSession s(WithFake("python3", "printf '\\n%s python\\n' \"$3\"; while IFS= read -r l; do :; done"));
  const auto start = std::chrono::steady_clock::now();
  auto got = s.ClockExchange(3, 500ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(ErrorKindOf(got.status()), SshErrorKind::kTimeout) << got.status().ToString();
  EXPECT_NE(got.status().message().find("no reply 1 of 3 within 500 ms"), std::string::npos) << got.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  auto r = s.Exec("echo again", 10s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

TEST_F(ClockExchangeTest, ALoopThatDiesIsNamedWithItsStatusAndStderr) {
  SshSession s(WithFake("python3", "echo 'Traceback: no time here' >&2; exit 4"));
  auto got = s.ClockExchange(3, 10s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(ErrorKindOf(got.status()), SshErrorKind::kRemoteError) << got.status().ToString();
  EXPECT_NE(got.status().message().find("exit status 4"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("Traceback: no time here"), std::string::npos) << got.status().message();
}

TEST_F(ClockExchangeTest, SamplesOutOfRangeAreRefusedBeforeAnythingRuns) {
  SshSession s(sshd_.target());
  auto got = s.ClockExchange(0, 10s);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(ErrorKindOf(got.status()), SshErrorKind::kInvalidInput);
  EXPECT_EQ(s.commands(), 0);
}

}  // namespace
}  // namespace npuprof::ssh
