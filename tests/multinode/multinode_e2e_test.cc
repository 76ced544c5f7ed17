// Multi-node deployments end to end from the npuprof command: simulated hosts
// on their own loopback addresses (127.0.0.2, ...), each behind its own sshd
// with its own NPUs, state, ground truth and clock; the headless nodes'
// engines really connect to the head's address and RPC port.
//
//   * serve on 2 nodes x 4 NPUs (tp 4, dp 2) and on 3 nodes (tp 2, dp 3):
//     ready, every node's service launched once with the data-parallel flags
//     of its place, stopped on every node, nothing left running anywhere;
//   * torch-profile on 2 nodes: the gates over the whole deployment, every
//     node's rank dirs in the manifest with their machine, the clock offset
//     of the node that runs 3.2 s ahead within 20 ms of the truth;
//   * torch-profile on 2 nodes x 4 NPUs (tp 4, dp 2) and on 3 nodes (tp 2,
//     dp 3): every node's rank dirs and each rank's kernel time as that
//     node's truth has them;
//   * faults: a node that never joins fails the run within its readiness
//     deadline, a node killed during the workload fails the run naming it, a
//     node whose rank writes no profile dir is a rank_count_mismatch naming
//     it; every node clean afterwards;
//   * gang leases: two multi-node runs over overlapping machines and a
//     one-node run queued at once each run once, never half held.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/multinode/multinode_helpers.h"
#include "tests/support/npuprof_harness.h"
#include "tests/support/sshd_fixture.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

// The argv of the one vLLM service a node's truth recorded (its launch), or null.
json ServeArgvOf(NpuprofHarness& h, const std::string& node) {
  const auto truths = h.SimTruthFiles(node);
  if (truths.size() != 1) return nullptr;
  return truths[0].value("argv", json(nullptr));
}

std::string Joined(const json& argv) {
  std::string out;
  if (!argv.is_array()) return out;
  for (const auto& a : argv) out += (a.is_string() ? a.get<std::string>() : a.dump()) + " ";
  return out;
}

class MultiNodeE2E : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(h_.Start().ok()); }
  void AddNodes(const std::vector<std::pair<std::string, std::vector<std::string>>>& nodes) {
    for (const auto& [name, args] : nodes) ASSERT_TRUE(h_.AddNode(name, args).ok()) << name;
  }
  NpuprofHarness h_;
};

TEST_F(MultiNodeE2E, ServeOnTwoNodesOfFourNpusIsReadyThenStoppedOnEveryNode) {
  AddNodes({{"head", {"--devices", "4", "--startup-delay", "0.3"}}, {"worker", {"--devices", "4", "--startup-delay", "0.3"}}});
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "serve", "--node", "head:0,1,2,3", "--node", "worker", "--model", model, "--tp", "4",
                        "--dp", "2", "--health-timeout", "120", "--wait"},
                       240);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json show = r.json();
  const std::string run = show.value("run_id", "");
  EXPECT_EQ(show["state"], "ready");
  ASSERT_TRUE(show["nodes"].is_array());
  EXPECT_EQ(show["nodes"][0]["machine"], "worker");
  EXPECT_EQ(show["nodes"][0]["status"], "ready");
  EXPECT_EQ(show["devices_lease"]["nodes"][1]["machine"], "worker");
  EXPECT_EQ(show["devices_lease"]["nodes"][1]["devices"].size(), 4u) << "any free ones, found by the worker's own probe";

  // Each node ran one vLLM with the flags of its place in the deployment.
  const std::string head_argv = Joined(ServeArgvOf(h_, "head"));
  const std::string worker_argv = Joined(ServeArgvOf(h_, "worker"));
  EXPECT_NE(head_argv.find("--data-parallel-size 2 --data-parallel-size-local 1 --data-parallel-address 127.0.0.2"),
            std::string::npos)
      << head_argv;
  EXPECT_EQ(head_argv.find("--headless"), std::string::npos) << head_argv;
  EXPECT_NE(worker_argv.find("--headless --data-parallel-start-rank 1"), std::string::npos) << worker_argv;
  EXPECT_EQ(h_.LiveServicePids("head").size(), 1u);
  EXPECT_EQ(h_.LiveServicePids("worker").size(), 1u);

  CliResult stop = h_.Cli({"stop", run, "--wait"}, 120);
  ASSERT_EQ(stop.exit_code, 0) << stop.err << stop.out;
  CliResult after = h_.Cli({"show", run});
  EXPECT_EQ(after.json()["status"], "ok") << after.out;
  EXPECT_EQ(after.json()["nodes"][0]["status"], "stopped");
  ExpectNothingLeft(h_);
  CliResult verify = h_.Cli({"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

TEST_F(MultiNodeE2E, ServeOnThreeNodesTp2Dp3) {
  AddNodes({{"n0", {"--devices", "2"}}, {"n1", {"--devices", "2"}}, {"n2", {"--devices", "2"}}});
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "serve", "--node", "n0", "--node", "n1", "--node", "n2", "--model", model, "--tp",
                        "2", "--dp", "3", "--health-timeout", "120", "--wait"},
                       240);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string run = r.json().value("run_id", "");
  EXPECT_NE(Joined(ServeArgvOf(h_, "n2")).find("--data-parallel-start-rank 2"), std::string::npos);
  ASSERT_EQ(h_.Cli({"stop", run, "--wait"}, 120).exit_code, 0);
  ExpectNothingLeft(h_);
}

TEST_F(MultiNodeE2E, ANodeThatNeverJoinsFailsTheRunWithinItsDeadlineAndEveryNodeIsClean) {
  AddNodes({{"head", {"--devices", "2"}}, {"worker", {"--devices", "2", "--fault", "never_join"}}});
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "serve", "--node", "head", "--node", "worker", "--model", model, "--tp", "2", "--dp",
                        "2", "--health-timeout", "15", "--wait"},
                       240);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  const std::string run = r.json().value("run_id", "");
  CliResult show = h_.Cli({"show", run});
  EXPECT_EQ(show.json()["status"], "failed") << show.out;
  ExpectNothingLeft(h_);
}

// Every node launches at once, told the RPC port before the head listens on
// it, so the head's launch checks it first: a port another process holds on
// the head starts nothing there, the worker (launched beside it) is stopped,
// and the run fails naming the port and the flag.
TEST_F(MultiNodeE2E, AnRpcPortTakenOnTheHeadFailsTheRunNamingItAndEveryNodeIsClean) {
  AddNodes({{"head", {"--devices", "2"}}, {"worker", {"--devices", "2"}}});
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ASSERT_EQ(::inet_pton(AF_INET, h_.NodeAddress("head").c_str(), &a.sin_addr), 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string held = std::to_string(ntohs(a.sin_port));
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "serve", "--node", "head", "--node", "worker", "--model", model, "--tp", "2", "--dp",
                        "2", "--dp-rpc-port", held, "--health-timeout", "60", "--wait"},
                       240);
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  const std::string run = r.json().value("run_id", "");
  CliResult show = h_.Cli({"show", run});
  const json j = show.json();
  EXPECT_EQ(j["status"], "failed") << show.out;
  const std::string error = j.value("error", "");
  EXPECT_NE(error.find("port_unavailable"), std::string::npos) << error;
  EXPECT_NE(error.find(held), std::string::npos) << "names the port: " << error;
  EXPECT_NE(error.find("--dp-rpc-port"), std::string::npos) << "names the fix: " << error;
  ExpectNothingLeft(h_);
}

// A node whose sshd refuses SFTP (minimal containers, hardened hosts): its
// launch, flush wait, listing and analyses move files over the command
// channel, and the deployment's profile is whole.
TEST_F(MultiNodeE2E, TorchProfileOnTwoNodesWhereTheWorkerRefusesSftp) {
  AddNodes({{"head", {"--devices", "2"}}, {"worker", {"--devices", "2"}}});
  SshdFixture* worker = h_.NodeSshd("worker");
  ASSERT_NE(worker, nullptr);
  // The same sshd (port, keys) again without its `Subsystem sftp` line.
  worker->Stop();
  const std::string config_path = worker->dir() + "/sshd_config";
  std::string config;
  {
    std::ifstream in(config_path);
    config.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto at = config.find("Subsystem sftp");
  ASSERT_NE(at, std::string::npos);
  config.erase(at, config.find('\n', at) - at + 1);
  {
    std::ofstream out(config_path, std::ios::trunc);
    out << config;
  }
  ASSERT_TRUE(worker->Relaunch().ok());
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "torch-profile", "--node", "head", "--node", "worker", "--model", model,
                        "--served-model-name", "m", "--tp", "2", "--dp", "2", "--tag", "nosftp", "--mode",
                        "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "8",
                        "--benchmark-total-requests", "4", "--benchmark-concurrency", "2", "--prompt-tokens", "32",
                        "--wait"},
                       300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json m = r.json();
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(m["rank_count"], 4);
  int worker_ranks = 0;
  for (const auto& d : m["remote_profile_dirs"]) {
    if (d.value("machine", "") != "worker") continue;
    ++worker_ranks;
    const json ks = d.value("kernel_summary", json());
    EXPECT_TRUE(ks.is_object() && !ks.contains("error")) << ks.dump();
    EXPECT_GT(ks.value("counted_rows", 0), 0) << "read over the command channel: " << ks.dump();
  }
  EXPECT_EQ(worker_ranks, 2);
  // The worker's part of the run (its launch, its profile root's listing,
  // its ranks' digests) runs as commands: its sshd is never asked for SFTP.
  // (A refused SFTP request served by the command channel instead is
  // HostileTarget.EveryRunKindPassesWithoutAnSftpSubsystem's.)
  EXPECT_EQ(worker->log().find("subsystem request for sftp"), std::string::npos)
      << "the worker's sshd was asked for SFTP:\n" << worker->log();
  ExpectNothingLeft(h_);
}

TEST_F(MultiNodeE2E, TorchProfileOnTwoNodesGatesTheDeploymentAndMeasuresEachClock) {
  AddNodes({{"head", {"--devices", "2"}}, {"worker", {"--devices", "2", "--clock-offset-s", "3.2"}}});
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "torch-profile", "--node", "head", "--node", "worker", "--model", model,
                        "--served-model-name", "m", "--tp", "2", "--dp", "2", "--tag", "mn", "--mode",
                        "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "16",
                        "--benchmark-total-requests", "8", "--benchmark-concurrency", "4", "--prompt-tokens", "64",
                        "--wait"},
                       300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json m = r.json();
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["expected_ranks"], 4);
  EXPECT_EQ(m["rank_count"], 4);
  std::set<std::string> machines;
  for (const auto& d : m["remote_profile_dirs"]) machines.insert(d.value("machine", ""));
  EXPECT_EQ(machines, (std::set<std::string>{"head", "worker"}));
  // The worker's clock runs 3.2 s ahead of this machine's.
  double offset = 0;
  for (const auto& o : m["clock_offsets"]["start"]["offsets"])
    if (o.value("machine", "") == "worker") offset = o.value("offset_ms", 0.0);
  std::cerr << "measured clock offsets (the worker's truth: +3200 ms): " << m["clock_offsets"]["start"].dump() << "\n";
  EXPECT_NEAR(offset, 3200.0, 20.0) << m["clock_offsets"].dump();
  ExpectNothingLeft(h_);
}

// A torch-profile of the given shape over nodes: the gates over the whole
// deployment, and every node's rank dirs and kernel totals as that node's
// truth has them (the dirs its ranks wrote, the kernels each will sum to).
void ExpectTorchProfileMatchesEachNodesTruth(NpuprofHarness& h, const std::vector<std::string>& nodes, int tp,
                                             int dp) {
  std::vector<std::string> args = {"submit", "torch-profile"};
  for (const auto& n : nodes) args.insert(args.end(), {"--node", n});
  const std::vector<std::string> rest = {"--model", Model(h), "--served-model-name", "m", "--tp", std::to_string(tp),
                                         "--dp", std::to_string(dp), "--tag", "mn", "--mode", "enforce_eager",
                                         "--request-kind", "text", "--benchmark-output-tokens", "8",
                                         "--benchmark-total-requests", "6", "--benchmark-concurrency", "3",
                                         "--prompt-tokens", "64", "--wait"};
  args.insert(args.end(), rest.begin(), rest.end());
  CliResult r = h.Cli(args, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const json m = r.json();
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["expected_ranks"], tp * dp);
  EXPECT_EQ(m["rank_count"], tp * dp);
  const int per_node = tp * dp / static_cast<int>(nodes.size());
  ASSERT_EQ(m["rank_counts"].size(), nodes.size()) << m["rank_counts"].dump();
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(m["rank_counts"][i]["machine"], nodes[i]);
    EXPECT_EQ(m["rank_counts"][i]["found"], per_node) << nodes[i];
  }
  // Each node's truth: the dirs its ranks wrote and the kernel time each holds.
  std::map<std::string, std::pair<std::string, double>> truth;  // dir base name -> (node, total µs)
  for (const auto& n : nodes) {
    const auto truths = h.SimTruthFiles(n);
    ASSERT_EQ(truths.size(), 1u) << "one vLLM launched on " << n;
    size_t ranks = 0;
    for (const auto& session : truths[0].value("profile_sessions", json::array()))
      for (const auto& rank : session.value("ranks", json::array())) {
        double total = 0;
        for (const auto& k : rank.value("kernels", json::array())) total += k.value("total_us", 0.0);
        truth[std::filesystem::path(rank.value("dir", "")).filename().string()] = {n, total};
        ++ranks;
      }
    EXPECT_EQ(ranks, static_cast<size_t>(per_node)) << "rank dirs in " << n << "'s truth";
  }
  ASSERT_EQ(m["remote_profile_dirs"].size(), static_cast<size_t>(tp * dp));
  for (const auto& d : m["remote_profile_dirs"]) {
    const std::string base = std::filesystem::path(d.value("path", "")).filename().string();
    ASSERT_TRUE(truth.count(base)) << base << " is in no node's truth";
    EXPECT_EQ(d["machine"], truth[base].first) << base;
    EXPECT_NEAR(d["kernel_summary"].value("total_us", 0.0), truth[base].second, 0.01 * truth[base].second + 1)
        << base;
  }
  ExpectNothingLeft(h);
}

TEST_F(MultiNodeE2E, TorchProfileOnTwoNodesOfFourNpusTp4Dp2MatchesEachNodesTruth) {
  AddNodes({{"head", {"--devices", "4"}}, {"worker", {"--devices", "4"}}});
  ExpectTorchProfileMatchesEachNodesTruth(h_, {"head", "worker"}, 4, 2);
}

TEST_F(MultiNodeE2E, TorchProfileOnThreeNodesTp2Dp3MatchesEachNodesTruth) {
  AddNodes({{"n0", {"--devices", "2"}}, {"n1", {"--devices", "2"}}, {"n2", {"--devices", "2"}}});
  ExpectTorchProfileMatchesEachNodesTruth(h_, {"n0", "n1", "n2"}, 2, 3);
}

TEST_F(MultiNodeE2E, ANodeKilledDuringTheWorkloadFailsTheRunNamingIt) {
  AddNodes({{"head", {"--devices", "1"}}, {"worker", {"--devices", "1", "--fault", "die_after_requests=2"}}});
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "torch-profile", "--node", "head", "--node", "worker", "--model", model,
                        "--served-model-name", "m", "--tp", "1", "--dp", "2", "--tag", "mn", "--mode",
                        "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "64",
                        "--benchmark-total-requests", "20", "--benchmark-concurrency", "2", "--prompt-tokens", "64",
                        "--wait"},
                       300);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  const json m = r.json();
  EXPECT_EQ(m["status"], "failed");
  EXPECT_NE(m.value("error", "").find("worker"), std::string::npos) << m.value("error", "");
  ExpectNothingLeft(h_);
}

TEST_F(MultiNodeE2E, ANodeWhoseRankWritesNoProfileDirIsARankCountMismatchNamingIt) {
  AddNodes({{"head", {"--devices", "1"}}, {"worker", {"--devices", "1", "--fault", "rank_no_profile=[1]"}}});
  const std::string model = Model(h_);
  CliResult r = h_.Cli({"submit", "torch-profile", "--node", "head", "--node", "worker", "--model", model,
                        "--served-model-name", "m", "--tp", "1", "--dp", "2", "--tag", "mn", "--mode",
                        "enforce_eager", "--request-kind", "text", "--benchmark-output-tokens", "16",
                        "--benchmark-total-requests", "4", "--benchmark-concurrency", "2", "--prompt-tokens", "64",
                        "--flush-timeout", "10", "--wait"},
                       300);
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  const json m = r.json();
  EXPECT_EQ(m["analysis_status"], "rank_count_mismatch");
  EXPECT_NE(m.value("error", "").find("node 1 (worker) wrote 0 of 1 rank directories"), std::string::npos)
      << m.value("error", "");
  ExpectNothingLeft(h_);
}

TEST_F(MultiNodeE2E, OverlappingGangsAndAOneNodeRunEachRunOnceNeverHalfHeld) {
  AddNodes({{"a", {"--devices", "2"}}, {"b", {"--devices", "2"}}, {"c", {"--devices", "2"}}});
  const std::string model = Model(h_);
  // serve RUN_ID over nodes (each node's NPUs 0,1); --wait: until ready.
  const auto serve = [&](const std::vector<std::string>& nodes, const std::string& id, bool wait) {
    std::vector<std::string> args = {"submit", "serve", "--run-id", id, "--model", model, "--tp", "2", "--dp",
                                     std::to_string(nodes.size()), "--watch-poll", "0", "--health-timeout", "120"};
    if (nodes.size() == 1) {
      args.insert(args.end(), {"--machine", nodes[0], "--devices", "0,1"});
    } else {
      for (const auto& n : nodes) args.insert(args.end(), {"--node", n + ":0,1"});
    }
    if (wait) args.push_back("--wait");
    return h_.Cli(args, 240);
  };
  ASSERT_EQ(serve({"a", "b"}, "g1", true).exit_code, 0);
  ASSERT_EQ(serve({"b", "c"}, "g2", false).exit_code, 0);
  ASSERT_EQ(serve({"c"}, "one", false).exit_code, 0);
  // g2 waits for b (held by g1) and holds nothing meanwhile; `one` wants c,
  // free now but wanted by g2, which asked first: it waits too (FIFO on c).
  const json g2 = h_.Cli({"show", "g2"}).json();
  EXPECT_EQ(g2["state"], "queued") << g2.dump();
  EXPECT_NE(g2["waiting_for"].value("reason", "").find("on b:"), std::string::npos) << g2.dump();
  const json one = h_.Cli({"show", "one"}).json();
  EXPECT_EQ(one["state"], "queued") << one.dump();
  EXPECT_NE(one["waiting_for"].value("reason", "").find("wanted by an earlier queued run"), std::string::npos)
      << one.dump();
  EXPECT_TRUE(h_.LiveServicePids("c").empty()) << "nothing runs on c while g2 waits";

  ASSERT_EQ(h_.Cli({"stop", "g1", "--wait"}, 120).exit_code, 0);
  ASSERT_EQ(serve({"b", "c"}, "g2", true).exit_code, 0) << "g2 starts once g1 released b";
  ASSERT_EQ(h_.Cli({"stop", "g2", "--wait"}, 120).exit_code, 0);
  ASSERT_EQ(serve({"c"}, "one", true).exit_code, 0) << "and the one-node run after g2";
  ASSERT_EQ(h_.Cli({"stop", "one", "--wait"}, 120).exit_code, 0);
  for (const std::string id : {"g1", "g2", "one"}) {
    EXPECT_EQ(h_.Cli({"show", id}).json()["status"], "ok") << id;
    // One grant with every leg: a gang is never half held.
    int leased = 0;
    for (const auto& e : h_.Cli({"events", id, "--json"}).json().value("events", json::array()))
      if (e.value("type", "") == "DevicesLeased") ++leased;
    EXPECT_EQ(leased, 1) << id;
  }
  CliResult verify = h_.Cli({"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out;  // the lease audit: no device ever held twice
  ExpectNothingLeft(h_);
}

}  // namespace
}  // namespace npuprof::testing
