// The head of a multi-node deployment: its RPC port checked (and its API
// port picked) by the runtime dir check's command on a first launch
// (workers/handlers/launch_prepare.h, LaunchPrepareHeadArgv). The line's
// parser over good and malformed outputs, then the command run locally with
// /bin/sh against a real directory: a free RPC port is "free", one held by
// a listener here is "busy:98", and a launch that found its record checks
// nothing.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"
#include "workers/handlers/launch_prepare.h"
#include "workers/handlers/service_runtime_dir.h"

namespace npuprof::workers::service {
namespace {

namespace fs = std::filesystem;
using ssh::testing::RunLocalArgv;

TEST(LaunchPrepareHead, ParsesTheHeadPortsLine) {
  auto p = ParsePreparedHeadPorts("uid 1000 me\ndir ok\nentry absent - pid\n", true);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->asked);
  p = ParsePreparedHeadPorts("dir ok\nnpuprof-head-ports 31234 free\n", true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->asked && p->ports);
  EXPECT_EQ(p->ports->api, 31234);
  EXPECT_TRUE(p->ports->rpc_free);
  p = ParsePreparedHeadPorts("dir ok\nnpuprof-head-ports 0 busy:98\n", false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->ports);
  EXPECT_FALSE(p->ports->rpc_free);
  EXPECT_EQ(p->ports->rpc_why, "busy:98");
  p = ParsePreparedHeadPorts("dir ok\nnpuprof-head-ports-failed\n", true);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->asked);
  EXPECT_FALSE(p->ports.has_value());
  for (const char* bad : {"npuprof-head-ports\n", "npuprof-head-portsx 1 free\n", "npuprof-head-ports 0 free\n",
                          "npuprof-head-ports abc free\n", "npuprof-head-ports 1 maybe\n",
                          "npuprof-head-ports 1 free extra\n", "npuprof-head-ports 1 free\nnpuprof-head-ports 2 free\n",
                          "npuprof-head-ports-failed\nnpuprof-head-ports 2 free\n"}) {
    auto b = ParsePreparedHeadPorts(bad, true);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), Code::kCorruption) << bad;
  }
}

struct Dirs {
  npuprof::testing::TempDir t;
  std::string base = t.path + "/runtime";
  std::string rt = base + "/r1/service-1-node0";
  std::vector<std::string> below = {"r1", "service-1-node0"};
};

ssh::testing::LocalRun PrepareHead(const Dirs& d, int rpc, bool pick_api) {
  const std::vector<std::string> entries = {"launch.json", ".started", "pid"};
  return RunLocalArgv(LaunchPrepareHeadArgv(RuntimeDirArgv(true, d.base, d.below, entries), d.rt, entries, rpc, pick_api),
                      "");
}

// A listener on 127.0.0.1 at a port the kernel chose.
struct Listener {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  Listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 1);
    socklen_t n = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
};

TEST(LaunchPrepareHead, AFirstLaunchChecksTheRpcPortAndPicksTheApiPortInOneCommand) {
  if (system("python3 -c pass") != 0) GTEST_SKIP() << "no python3 here";
  int free_port = 0;
  {
    Listener l;  // a port that was free a moment ago
    free_port = l.port;
  }
  Dirs d;
  auto r = PrepareHead(d, free_port, true);
  ASSERT_EQ(r.status, 0) << r.err;
  auto report = ParseRuntimeDirReport(r.out);
  ASSERT_TRUE(report.ok()) << r.out;
  EXPECT_TRUE(fs::is_directory(d.rt));
  auto ports = ParsePreparedHeadPorts(r.out, true);
  ASSERT_TRUE(ports.ok()) << r.out;
  ASSERT_TRUE(ports->asked && ports->ports) << r.out << r.err;
  EXPECT_TRUE(ports->ports->rpc_free) << r.out;
  EXPECT_GT(ports->ports->api, 0);
  EXPECT_NE(ports->ports->api, free_port);

  Listener held;  // the RPC port taken: busy, with bind's errno (EADDRINUSE)
  Dirs d2;
  r = PrepareHead(d2, held.port, false);
  ASSERT_EQ(r.status, 0) << r.err;
  ports = ParsePreparedHeadPorts(r.out, false);
  ASSERT_TRUE(ports.ok() && ports->ports) << r.out << r.err;
  EXPECT_FALSE(ports->ports->rpc_free);
  EXPECT_EQ(ports->ports->rpc_why, "busy:98");
  EXPECT_EQ(ports->ports->api, 0);  // not asked to pick one
}

TEST(LaunchPrepareHead, ALaunchThatFoundItsRecordChecksNothing) {
  Dirs d;
  fs::create_directories(d.rt);
  for (const auto& p : {d.base, d.base + "/r1", d.rt}) fs::permissions(p, fs::perms::owner_all);
  std::ofstream(d.rt + "/launch.json") << "{}";
  auto r = PrepareHead(d, 20001, true);
  ASSERT_EQ(r.status, 0) << r.err;
  auto ports = ParsePreparedHeadPorts(r.out, true);
  ASSERT_TRUE(ports.ok());
  EXPECT_FALSE(ports->asked) << r.out;
}

}  // namespace
}  // namespace npuprof::workers::service
