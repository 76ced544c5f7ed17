// The tcp listener end to end, from the npuprof command against a real
// server (tests/support/npuprof_harness.h): peers without an allowed key get
// no answer while the owner works; a remote worker with an allowed key
// serves a probe run; key files must be private; the message cap.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/security/security_test_util.h"
#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

template <typename Pred>
bool PollFor(Pred pred, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

class ListenerE2E : public ::testing::Test {
 protected:
  // A server listening on a loopback tcp port too (CURVE on).
  void StartServer(int local_workers) {
    tcp_ = "tcp://127.0.0.1:" + std::to_string(FreeLoopbackPort());
    h_.SetServerListen({tcp_});
    ASSERT_TRUE(h_.Start({}, local_workers).ok());
    server_pub_file_ = h_.DataDir() + "/curve/server.pub";
  }
  // A new key pair file; its public key.
  std::string NewKey(const std::string& name) {
    CliResult r = h_.CliRaw({"keys", "new", "--out", h_.Dir() + "/" + name + ".key"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string key = r.json().value("public_key", "");
    EXPECT_FALSE(key.empty()) << "keys new printed no public_key: " << r.out << r.err;
    return key;
  }
  // `keys allow NAME KEY` on the server's data dir; its output on failure.
  void Allow(const std::string& name, const std::string& key) {
    CliResult r = h_.Cli({"keys", "allow", name, "--", key});  // a Z85 key may start with a dash
    ASSERT_EQ(r.exit_code, 0) << "keys allow " << name << " '" << key << "': " << r.err << r.out;
  }
  std::string KeyFile(const std::string& name) const { return h_.Dir() + "/" + name + ".key"; }
  CliResult TcpClient(const std::vector<std::string>& verb, const std::string& key_name,
                      const std::string& server_key = "") {
    std::vector<std::string> args = verb;
    args.insert(args.end(), {"--broker", tcp_});
    if (!key_name.empty())
      args.insert(args.end(), {"--key-file", KeyFile(key_name), "--server-key",
                               server_key.empty() ? server_pub_file_ : server_key});
    return h_.CliRaw(args, 60);
  }

  NpuprofHarness h_;
  std::string tcp_, server_pub_file_;
};

TEST_F(ListenerE2E, TcpPeersWithoutAnAllowedKeyGetNoAnswerWhileTheOwnerWorks) {
  StartServer(/*local_workers=*/2);
  // The owner on the ipc socket (local key from the data dir, no flags).
  ASSERT_EQ(h_.Cli({"runs"}).exit_code, 0);

  CliResult keyless = TcpClient({"runs"}, "");
  EXPECT_EQ(keyless.exit_code, 2);
  EXPECT_NE(keyless.err.find("requires CURVE"), std::string::npos) << keyless.err;

  const std::string c1 = NewKey("c1");
  CliResult unlisted = TcpClient({"runs"}, "c1");
  EXPECT_EQ(unlisted.exit_code, 2);
  EXPECT_NE(unlisted.err.find("refused this peer's key " + c1), std::string::npos) << unlisted.err;
  EXPECT_NE(unlisted.err.find("npuprof keys allow NAME -- '" + c1 + "'"), std::string::npos) << unlisted.err;
  // The server logged it, with the key and the address.
  EXPECT_TRUE(PollFor([&] { return h_.Log("server").find("refused key " + c1 + " from 127.0.0.1") != std::string::npos; }, 30))
      << h_.Log("server");

  const std::string other_server = NewKey("not-the-server");
  CliResult wrong_server = TcpClient({"runs"}, "c1", other_server);
  EXPECT_EQ(wrong_server.exit_code, 2);
  EXPECT_NE(wrong_server.err.find("is not this server's public key"), std::string::npos) << wrong_server.err;

  // Meanwhile the owner's whole workflow runs (local workers authenticate with the local key).
  CliResult probe = h_.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err << probe.out;
  const std::string run_id = probe.json().value("run_id", "");

  // Allowed while the server runs: the next connection gets in, no restart.
  ASSERT_NO_FATAL_FAILURE(Allow("c1", c1));
  CliResult allowed = TcpClient({"show", run_id}, "c1");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_EQ(allowed.json().value("status", ""), "ok");
  EXPECT_NE(h_.Log("server").find("admitted peer 'c1'"), std::string::npos);

  // Removed: refused again from the next connection on.
  ASSERT_EQ(h_.Cli({"keys", "remove", "c1"}).exit_code, 0);
  CliResult removed = TcpClient({"runs"}, "c1");
  EXPECT_EQ(removed.exit_code, 2);
  EXPECT_NE(removed.err.find("refused this peer's key"), std::string::npos) << removed.err;
  EXPECT_EQ(h_.Cli({"runs"}).exit_code, 0);
}

TEST_F(ListenerE2E, RemoteWorkerWithAnAllowedKeyServesAProbeRun) {
  StartServer(/*local_workers=*/0);
  const std::string w1 = NewKey("w1");
  ASSERT_NO_FATAL_FAILURE(Allow("remote-w1", w1));
  NewKey("stranger");  // never allowed
  auto stranger = h_.StartWorker({"--broker", tcp_, "--key-file", KeyFile("stranger"), "--server-key",
                                  server_pub_file_, "--id", "stranger"},
                                 "worker-stranger");
  ASSERT_TRUE(stranger.ok());
  // Key and server key from the environment (NPUPROF_KEY_FILE / NPUPROF_SERVER_KEY).
  auto worker = h_.StartWorker({"--broker", tcp_, "--id", "remote-w1"}, "worker-w1",
                               {{"NPUPROF_KEY_FILE", KeyFile("w1")}, {"NPUPROF_SERVER_KEY", server_pub_file_}});
  ASSERT_TRUE(worker.ok());
  auto worker_ids = [&] {
    std::vector<std::string> ids;
    const auto j = h_.Cli({"workers"}, 10).json();
    if (j.is_object())
      for (const auto& w : j.value("workers", nlohmann::json::array())) ids.push_back(w.value("worker_id", ""));
    return ids;
  };
  ASSERT_TRUE(PollFor([&] { return !worker_ids().empty(); }, 60)) << h_.Log("worker-w1");
  // The stranger was told why, and never registered.
  ASSERT_TRUE(PollFor([&] { return h_.Log("worker-stranger").find("refused this peer's key") != std::string::npos; }, 60))
      << h_.Log("worker-stranger");
  EXPECT_EQ(worker_ids(), std::vector<std::string>{"remote-w1"});

  CliResult probe = h_.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err << probe.out;
  EXPECT_EQ(probe.json()["probe"]["device_count"], 8);
  EXPECT_NE(h_.Log("worker-w1").find("task_stats"), std::string::npos);
  EXPECT_EQ(worker_ids(), std::vector<std::string>{"remote-w1"});
}

TEST_F(ListenerE2E, KeyFilesMustBePrivate) {
  StartServer(/*local_workers=*/0);
  const std::string c1 = NewKey("c1");
  ASSERT_NO_FATAL_FAILURE(Allow("c1", c1));
  ASSERT_EQ(TcpClient({"runs"}, "c1").exit_code, 0);
  ::chmod(KeyFile("c1").c_str(), 0644);
  CliResult open_key = TcpClient({"runs"}, "c1");
  EXPECT_EQ(open_key.exit_code, 2);
  EXPECT_NE(open_key.err.find("accessible by group or others"), std::string::npos) << open_key.err;
  // A key file without the server's key (or the other way round) says what is missing.
  ::chmod(KeyFile("c1").c_str(), 0600);
  CliResult half = h_.CliRaw({"runs", "--broker", tcp_, "--key-file", KeyFile("c1")}, 60);
  EXPECT_EQ(half.exit_code, 2);
  EXPECT_NE(half.err.find("--key-file needs --server-key"), std::string::npos) << half.err;
  // The server's data dir and key material.
  EXPECT_EQ(ModeOf(h_.DataDir()), 0700);
  EXPECT_EQ(ModeOf(h_.DataDir() + "/curve"), 0700);
  EXPECT_EQ(ModeOf(h_.DataDir() + "/curve/server.key"), 0600);
  EXPECT_EQ(ModeOf(h_.DataDir() + "/curve/local.key"), 0600);
  EXPECT_EQ(ModeOf(h_.DataDir() + "/curve/allowed"), 0600);
}

// `--listen tcp://127.0.0.1:99999` used to bind another port (libzmq wraps
// it) while the log and listen.json said 99999; inproc:// was advertised.
TEST(ListenerE2EEndpoints, AnEndpointTheServerCannotServeIsRefused) {
  TempDir tmp;
  for (const char* endpoint : {"tcp://127.0.0.1:99999", "inproc://npuprof"}) {
    const std::string data = tmp.path() + "/data";
    const auto r =
        RunCommand({NpuprofBinary(), "server", "--data-dir", data, "--no-local-workers", "--listen", endpoint}, 30);
    EXPECT_FALSE(r.timed_out) << endpoint << ": the server started";
    EXPECT_EQ(r.exit_code, 2) << endpoint << r.err;
    EXPECT_NE(r.err.find(std::string("npuprof: --listen '") + endpoint + "'"), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(data + "/listen.json")) << "nothing advertised";
  }
}

}  // namespace
}  // namespace npuprof::testing
