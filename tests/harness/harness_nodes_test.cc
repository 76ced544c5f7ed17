// NpuprofHarness::AddNode: simulated hosts on 127.0.0.2, 127.0.0.3, each
// behind its own sshd, with its own target root and clock; npuprof reaches
// each through its inventory record; a multi-node deployment started on
// them over SSH is stopped by the harness's cleanup on every node.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/npuprof_harness.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::testing {
namespace {

using namespace std::chrono_literals;

double NowS() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The node's own sshd, its env script sourced by every command.
ssh::SshTarget NodeTarget(NpuprofHarness& h, const std::string& node) {
  ssh::SshTarget t = h.NodeSshd(node)->target();
  t.env_script = h.SimRoot(node) + "/set_env.sh";
  t.command_shell = false;
  return t;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string RunOn(ssh::SshSession& s, const std::string& cmd) {
  auto r = s.Exec(ssh::BuildRemoteScript(s.target().env_script, {}, {"bash", "-c", cmd}), 30s);
  if (!r.ok()) return "ERROR " + r.status().ToString();
  return Trim(r->stdout_data);
}

TEST(HarnessNodes, EachNodeIsItsOwnHostBehindItsOwnSshd) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  ASSERT_TRUE(h.AddNode("n1", {"--devices", "4"}).ok());
  ASSERT_TRUE(h.AddNode("n2", {"--devices", "2", "--clock-offset-s", "3.2"}).ok());
  EXPECT_EQ(h.NodeNames(), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(h.NodeAddress("n1"), "127.0.0.2");
  EXPECT_EQ(h.NodeAddress("n2"), "127.0.0.3");
  EXPECT_EQ(h.NodeAddress("sim1"), "");
  EXPECT_EQ(h.NodeSshd("nope"), nullptr);
  EXPECT_FALSE(h.AddNode("n1").ok());  // names are unique

  struct Expect {
    std::string node;
    int devices;
    double offset_s;
  };
  for (const Expect& e : {Expect{"n1", 4, 0.0}, Expect{"n2", 2, 3.2}}) {
    SCOPED_TRACE(e.node);
    SshdFixture* sshd = h.NodeSshd(e.node);
    ASSERT_NE(sshd, nullptr);
    EXPECT_EQ(sshd->listen_address(), h.NodeAddress(e.node));
    EXPECT_TRUE(PortAccepts(h.NodeAddress(e.node), sshd->port()));
    ssh::SshSession s(NodeTarget(h, e.node));
    ASSERT_TRUE(s.Connect().ok());  // strict host key check against [address]:port in known_hosts
    EXPECT_EQ(RunOn(s, "echo $NPUPROF_SIM_ROOT"), h.SimRoot(e.node));
    EXPECT_EQ(RunOn(s, "npu-smi info | grep -c '910B3'"), std::to_string(e.devices));
    // Its clock: `date +%s%N` reads offset_s ahead of this machine's clock.
    const double t0 = NowS();
    const std::string ns = RunOn(s, "date +%s%N");
    const double t1 = NowS();
    ASSERT_EQ(ns.size(), 19u) << ns;
    EXPECT_NEAR(std::stod(ns) / 1e9 - (t0 + t1) / 2, e.offset_s, (t1 - t0) / 2 + 0.05) << ns;
    EXPECT_NE(sshd->log().find("Accepted publickey"), std::string::npos);

    // npuprof reaches the node through its inventory record (host = the node's address).
    CliResult probe = h.Cli({"submit", "probe", "--machine", e.node, "--wait"}, 120);
    ASSERT_EQ(probe.exit_code, 0) << probe.err << probe.out;
    EXPECT_EQ(probe.json()["probe"]["device_count"], e.devices);
  }
}

TEST(HarnessNodes, CleanupStopsADeploymentOnEveryNode) {
  NpuprofHarness h;
  ASSERT_TRUE(h.Start().ok());
  ASSERT_TRUE(h.AddNode("head", {"--devices", "2", "--startup-delay", "0.2"}).ok());
  ASSERT_TRUE(h.AddNode("worker", {"--devices", "2", "--startup-delay", "0.2", "--clock-offset-s", "-1.5"}).ok());
  const std::string model = h.MakeModel({"--layers", "2", "--hidden", "512", "--intermediate", "1024", "--vocab",
                                         "8000", "--heads", "8", "--kv-heads", "2", "--head-dim", "64"});
  ASSERT_FALSE(model.empty());
  const int api = FreeLoopbackPort(), rpc = FreeLoopbackPort(h.NodeAddress("head"));
  const std::vector<std::string> common = {
      "vllm", "serve", model, "-tp", "1", "--data-parallel-size", "4", "--data-parallel-size-local", "2",
      "--data-parallel-address", h.NodeAddress("head"), "--data-parallel-rpc-port", std::to_string(rpc)};
  std::vector<std::string> head_argv = common, worker_argv = common;
  head_argv.insert(head_argv.end(), {"--port", std::to_string(api)});
  worker_argv.insert(worker_argv.end(), {"--headless", "--data-parallel-start-rank", "2"});

  ssh::SshSession head(NodeTarget(h, "head")), worker(NodeTarget(h, "worker"));
  for (auto [s, argv] : {std::pair{&head, head_argv}, std::pair{&worker, worker_argv}}) {
    const std::string root = s->target().env_script.substr(0, s->target().env_script.rfind('/'));
    // (`cd D && cmd &` would background the whole list, whose shell keeps the channel open.)
    const std::string launch = "cd " + ssh::ShellQuote(root) + " || exit 1; ASCEND_RT_VISIBLE_DEVICES=0,1 setsid " +
                               ssh::BuildCommand(argv) + " > serve.log 2>&1 < /dev/null &";
    auto r = s->Exec(ssh::BuildRemoteScript(s->target().env_script, {}, {"bash", "-c", launch}), 30s);
    ASSERT_TRUE(r.ok() && r->exit_status == 0) << (r.ok() ? r->stderr_data : r.status().ToString());
  }
  // The head answers /health (through its own sshd) only once the worker's engines joined.
  ssh::HttpRequest health;
  health.remote_port = api;
  health.path = "/health";
  health.timeout = 2000ms;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  int code = 0;
  while (code != 200 && std::chrono::steady_clock::now() < deadline) {
    auto r = head.Http(health);
    code = r.ok() ? r->status : 0;
    if (code != 200) std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(code, 200) << RunOn(head, "tail -5 serve.log") << RunOn(worker, "tail -5 serve.log");
  ASSERT_EQ(h.SimTruthFiles("worker").size(), 1u);
  EXPECT_EQ(h.SimTruthFiles("worker")[0]["deployment"]["role"], "headless");
  EXPECT_EQ(h.SimTruthFiles("worker")[0]["deployment"]["clock_offset_s"], -1.5);
  EXPECT_EQ(h.SimTruthFiles("head")[0]["deployment"]["nodes"][0]["address"], h.NodeAddress("worker"));
  EXPECT_EQ(h.LiveServicePids("head").size(), 1u);
  EXPECT_EQ(h.LiveServicePids("worker").size(), 1u);
  EXPECT_FALSE(h.TargetProcesses().empty());

  h.Stop();  // every node's processes carry its target's marker
  EXPECT_TRUE(h.TargetProcesses().empty());
  EXPECT_TRUE(h.LiveServicePids("head").empty());
  EXPECT_TRUE(h.LiveServicePids("worker").empty());
}

}  // namespace
}  // namespace npuprof::testing
