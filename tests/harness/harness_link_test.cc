// NpuprofHarness::SetLink: simulated hosts reached through a latency relay
// (tests/support/latency_relay.h) each. npuprof is told the relay's port,
// the host key is still checked strictly (known_hosts names the relay's
// port too), and the relay counts what a run sent and waited for.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

int InventoryPort(NpuprofHarness& h, const std::string& machine) {
  const auto list = h.Cli({"machine", "list"}).json();
  for (const auto& m : list.value("machines", nlohmann::json::array()))
    if (m.value("name", "") == machine) return m.value("port", 0);
  return 0;
}

TEST(HarnessLink, EveryHostIsReachedThroughARelayOfItsOwn) {
  NpuprofHarness h;
  h.SetLink({20000, 0});  // 40 ms round trips
  ASSERT_TRUE(h.Start().ok());
  ASSERT_TRUE(h.AddNode("n1", {"--devices", "2"}).ok());
  ASSERT_NE(h.Relay(), nullptr);
  ASSERT_NE(h.Relay("n1"), nullptr);
  EXPECT_NE(h.Relay("n1"), h.Relay("sim1"));
  EXPECT_EQ(h.Relay("n1")->address(), h.NodeAddress("n1"));
  EXPECT_EQ(h.Relay()->options().delay_us, 20000);
  EXPECT_EQ(h.SshPort(), h.Relay()->port());
  EXPECT_NE(h.SshPort(), h.sshd().port());
  EXPECT_EQ(InventoryPort(h, "sim1"), h.Relay()->port());
  EXPECT_EQ(InventoryPort(h, "n1"), h.Relay("n1")->port());

  CliResult check = h.Cli({"machine", "check", "sim1"}, 120);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;  // strict host key, through the relay's port
  for (const std::string machine : {"sim1", "n1"}) {
    SCOPED_TRACE(machine);
    CliResult probe = h.Cli({"submit", "probe", "--machine", machine, "--wait"}, 120);
    ASSERT_EQ(probe.exit_code, 0) << probe.err << probe.out;
    const RelayStats s = h.Relay(machine)->Stats();
    EXPECT_GE(s.connections, 1u);
    EXPECT_GT(s.turns, 3u);  // SSH's key exchange and authentication alone take several
    EXPECT_GT(s.bytes_to_server, 1000u);
    EXPECT_GT(s.bytes_to_client, 1000u);
  }
  // A target added behind sim1's sshd goes through sim1's relay.
  ASSERT_TRUE(h.AddTarget("sim2").ok());
  EXPECT_EQ(h.Relay("sim2"), h.Relay("sim1"));
  EXPECT_EQ(InventoryPort(h, "sim2"), h.Relay()->port());
}

TEST(HarnessLink, WithoutALinkNothingIsInBetween) {
  NpuprofHarness h;
  if (std::getenv("NPUPROF_TEST_RTT_MS") != nullptr) GTEST_SKIP() << "NPUPROF_TEST_RTT_MS is set: every harness is far";
  ASSERT_TRUE(h.Start().ok());
  EXPECT_EQ(h.Relay(), nullptr);
  EXPECT_EQ(h.SshPort(), h.sshd().port());
  EXPECT_EQ(InventoryPort(h, "sim1"), h.sshd().port());
}

}  // namespace
}  // namespace npuprof::testing
