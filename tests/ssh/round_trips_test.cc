// The round-trip counter of the SSH layer (ssh_stats.h, "Round trips")
// against what a link sees: an SshSession talks to a loopback sshd through
// the test kit's latency relay (tests/support/latency_relay.h, no delay), and
// for each kind of call the session's count is held to the relay's turns
// (client->server traffic followed by server->client) during that call.
// The rule's figures are the pure part (checked first); the relay shows
// they are the exchanges a far link makes the call wait for.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "tests/support/latency_relay.h"
#include "tests/support/sshd_fixture.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_session.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::ssh {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(RoundTripRule, ListingIsOpenReadsEndAndClose) {
  EXPECT_EQ(SftpListRoundTrips(2), 4);    // an empty directory: ".", ".." in one answer, then end of list
  EXPECT_EQ(SftpListRoundTrips(100), 4);  // one full answer
  EXPECT_EQ(SftpListRoundTrips(101), 5);
  EXPECT_EQ(SftpListRoundTrips(0), 3);
}

TEST(RoundTripRule, SumsAndDifferencesCarryTheCount) {
  SshStats a, b;
  a.round_trips = 7;
  b.round_trips = 3;
  EXPECT_EQ((a - b).round_trips, 4);
  a += b;
  EXPECT_EQ(a.round_trips, 10);
  EXPECT_NE(FormatSshStats(a).find("round_trips=10"), std::string::npos);
}

class RoundTripsVsRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status s = sshd_.Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    npuprof::testing::RelayOptions o;
    o.upstream_port = sshd_.port();
    relay_ = std::make_unique<npuprof::testing::LatencyRelay>(o);
    s = relay_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    target_ = sshd_.target();
    target_.port = relay_->port();
    target_.known_hosts_file = sshd_.dir() + "/known_hosts_relay";
    std::ofstream(target_.known_hosts_file) << "[127.0.0.1]:" << relay_->port() << " " << sshd_.host_public_key() << "\n";
    files_ = sshd_.dir() + "/rt";
    fs::create_directories(files_);
  }
  void TearDown() override {
    if (relay_) relay_->Stop();
  }

  // Runs f; returns {counted round trips, relay turns} during it.
  std::pair<int64_t, int64_t> Measure(const SshStatsScope& scope, const std::function<void()>& f) {
    const int64_t c0 = scope.totals().round_trips;
    const auto t0 = relay_->Stats().turns;
    f();
    const int64_t c1 = scope.totals().round_trips;
    const auto t1 = relay_->Stats().turns;
    return {c1 - c0, static_cast<int64_t>(t1 - t0)};
  }

  npuprof::testing::SshdFixture sshd_;
  std::unique_ptr<npuprof::testing::LatencyRelay> relay_;
  SshTarget target_;
  std::string files_;
};

// Each call's count is at most the relay's turns and at most 2 below them:
// the relay also counts a turn where the client sent something it did not
// wait on (a channel's EOF or CLOSE, a window adjustment) and the server's
// next data followed, unasked (a command's output after the client's EOF);
// a channel closed at the end of one call can answer in the next call's
// window. Over the whole sequence the two stay within 10 %.
TEST_F(RoundTripsVsRelayTest, EachCallCountsTheTurnsTheLinkSees) {
  SshStatsScope scope;
  SshSession s(target_);
  SshTarget no_shell = target_;
  no_shell.command_shell = false;  // every command on a channel of its own
  SshSession c(no_shell);
  struct Step {
    const char* name;
    std::function<void()> f;
  };
  const std::string big(200000, 'x');  // 7 write requests, 8 read requests (the last one: end of file)
  std::vector<Step> steps = {
      {"connect", [&] { ASSERT_TRUE(s.Connect().ok()); }},
      {"first command (shell start)", [&] { ASSERT_TRUE(s.Exec("true", 10s).ok()); }},
      {"shell command", [&] { ASSERT_TRUE(s.Exec("echo hi", 10s).ok()); }},
      {"shell command again", [&] { ASSERT_TRUE(s.Exec("echo hi; echo err >&2", 10s).ok()); }},
      {"command with stdin", [&] { ASSERT_TRUE(s.Exec("cat >/dev/null", 10s, "data").ok()); }},
      {"first stat (sftp start)", [&] { ASSERT_TRUE(s.Stat(files_).ok()); }},
      {"stat", [&] { ASSERT_TRUE(s.Stat(files_).ok()); }},
      {"write small", [&] { ASSERT_TRUE(s.WriteFile(files_ + "/a", "hello", 0644).ok()); }},
      {"write 200 KB", [&] { ASSERT_TRUE(s.WriteFile(files_ + "/b", big, 0644).ok()); }},
      {"read small", [&] { ASSERT_TRUE(s.ReadFile(files_ + "/a").ok()); }},
      {"read 200 KB", [&] { ASSERT_TRUE(s.ReadFile(files_ + "/b").ok()); }},
      {"list", [&] { ASSERT_TRUE(s.ListDir(files_).ok()); }},
      {"stat missing", [&] { ASSERT_FALSE(s.Stat(files_ + "/none").ok()); }},
      {"shell command last", [&] { ASSERT_TRUE(s.Exec("true", 10s).ok()); }},
      {"clock exchange, 5 samples", [&] { ASSERT_TRUE(s.ClockExchange(5, 10s).ok()); }},
      {"connect (no command shell)", [&] { ASSERT_TRUE(c.Connect().ok()); }},
      {"command on its own channel", [&] { ASSERT_TRUE(c.Exec("echo hi", 10s).ok()); }},
      {"again on its own channel", [&] { ASSERT_TRUE(c.Exec("true", 10s).ok()); }},
  };
  int64_t counted = 0, turns = 0;
  for (const auto& step : steps) {
    const auto [c, t] = Measure(scope, step.f);
    ASSERT_FALSE(HasFatalFailure()) << step.name;
    std::printf("%-28s counted %3lld  relay turns %3lld\n", step.name, static_cast<long long>(c), static_cast<long long>(t));
    EXPECT_GE(c, 1) << step.name;
    // A handshake's first exchanges may merge on the wire (the client sends
    // its version line and its KEXINIT without waiting for the server's,
    // when the server's banner comes late): the relay then sees one turn fewer.
    const int64_t merged = std::string_view(step.name).rfind("connect", 0) == 0 ? 1 : 0;
    EXPECT_LE(c, t + merged) << step.name << ": counted " << c << ", the relay saw " << t;
    EXPECT_LE(t - c, 2) << step.name << ": counted " << c << ", the relay saw " << t;
    counted += c;
    turns += t;
  }
  std::printf("%-28s counted %3lld  relay turns %3lld\n", "total", static_cast<long long>(counted), static_cast<long long>(turns));
  EXPECT_LE(counted, turns + 2);  // the two handshakes
  EXPECT_GE(static_cast<double>(counted), 0.9 * static_cast<double>(turns)) << "counted " << counted << ", the relay saw " << turns;
}

}  // namespace
}  // namespace npuprof::ssh
