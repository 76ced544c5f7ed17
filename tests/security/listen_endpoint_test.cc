// `npuprof server --listen` endpoints (broker/listen_endpoint.h): what
// libzmq would take but the server cannot serve as named is refused before
// anything is made or bound (Broker::Open does not even make the data dir).
// From the command: ListenerE2E.AnEndpointTheServerCannotServeIsRefused.
#include "broker/listen_endpoint.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "broker/broker.h"
#include "tests/security/security_test_util.h"

namespace npuprof::broker {
namespace {

TEST(ListenEndpoint, TcpAndIpcEndpointsTheServerCanServe) {
  for (const char* ok : {"tcp://127.0.0.1:5555", "tcp://*:1", "tcp://0.0.0.0:65535", "tcp://[::1]:5555",
                         "tcp://localhost:5555", "tcp://eth0:5555", "ipc:///tmp/npuprof.sock",
                         "ipc://@npuprof-abstract"}) {
    const Status st = CheckListenEndpoint(ok);
    EXPECT_TRUE(st.ok()) << ok << ": " << st.message();
  }
}

TEST(ListenEndpoint, PortsTransportsAndHostsItCannotAreRefusedNamingTheForm) {
  const std::pair<const char*, const char*> bad[] = {
      {"tcp://127.0.0.1:99999", "the port must be a number 1-65535"},  // libzmq wraps it to 34463
      {"tcp://127.0.0.1:65536", "the port must be a number 1-65535"},
      {"tcp://127.0.0.1:0", "wildcard port"},
      {"tcp://127.0.0.1:*", "wildcard port"},
      {"tcp://127.0.0.1:-1", "the port must be a number 1-65535"},
      {"tcp://127.0.0.1:55x", "the port must be a number 1-65535"},
      {"tcp://127.0.0.1", "no port"},
      {"tcp://:5555", "no host"},
      {"tcp://::1:5555", "brackets"},
      {"tcp://a;b:5555", "';'"},
      {"tcp://a b:5555", "space, control character"},
      {"inproc://npuprof", "only from inside the server's own process"},
      {"pgm://eth0;239.192.1.1:5555", "transport 'pgm'"},
      {"udp://127.0.0.1:5555", "transport 'udp'"},
      {"127.0.0.1:5555", "no transport"},
      {"TCP://127.0.0.1:5555", "transport 'TCP'"},
      {"ipc://", "no socket path"},
      {"ipc://*", "wildcard"},
  };
  for (const auto& [endpoint, why] : bad) {
    const Status st = CheckListenEndpoint(endpoint);
    ASSERT_FALSE(st.ok()) << endpoint;
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_NE(st.message().find(std::string("--listen '") + endpoint + "'"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("expected tcp://HOST:PORT"), std::string::npos) << st.message();
  }
  const std::string long_path = "ipc:///" + std::string(120, 'a');
  EXPECT_NE(CheckListenEndpoint(long_path).message().find("over the 107 bytes"), std::string::npos);
}

TEST(ListenEndpoint, BrokerOpenRefusesBeforeMakingTheDataDir) {
  npuprof::testing::TempDir tmp;
  for (const char* endpoint : {"tcp://127.0.0.1:99999", "inproc://npuprof"}) {
    BrokerOptions o;
    o.data_dir = tmp.path() + "/data";
    o.endpoints = {endpoint};
    auto b = Broker::Open(o);
    ASSERT_FALSE(b.ok()) << endpoint;
    EXPECT_NE(b.status().message().find(endpoint), std::string::npos) << b.status().message();
    EXPECT_FALSE(std::filesystem::exists(o.data_dir)) << "nothing is made for a refused endpoint";
  }
}

}  // namespace
}  // namespace npuprof::broker
