// End to end: `npuprof server` with --metrics-listen (here through
// NPUPROF_METRICS_LISTEN, the flag's environment form) on a free loopback
// port, probe runs against the simulated target and one run that fails
// after retries; the scraped counters move exactly as the runs finish, and
// `promtool check metrics` accepts every scrape.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/npuprof_harness.h"
#include "workers/poll_backoff.h"

namespace npuprof::testing {
namespace {

// The body of GET /metrics ("" when the server did not answer 200).
std::string Scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[8192];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (resp.rfind("HTTP/1.1 200 ", 0) != 0) return "";
  return resp.substr(resp.find("\r\n\r\n") + 4);
}

// series (as written, labels included) -> value, for every sample line.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

double Get(const std::map<std::string, double>& s, const std::string& series) {
  auto it = s.find(series);
  return it == s.end() ? 0 : it->second;  // a counter not seen yet is zero
}

// promtool's verdict on text: "" when it passes, else what it said.
std::string Promtool(const std::string& text, const std::string& dir) {
  const std::string path = dir + "/scrape.txt";
  std::ofstream(path) << text;
  FILE* p = ::popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  if (!p) return "cannot run promtool";
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return out.empty() ? "promtool failed" : out;
  return out;
}

TEST(MetricsE2E, CountersMoveAsRunsFinishAndPromtoolAcceptsEveryScrape) {
  const bool have_promtool = std::system("command -v promtool >/dev/null 2>&1") == 0;
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  NpuprofHarness h;
  h.SetServerEnv({{"NPUPROF_METRICS_LISTEN", "127.0.0.1:" + std::to_string(port)}});
  ASSERT_TRUE(h.Start().ok());

  // Gauges are set at the end of a loop turn: wait for the one that saw both local workers.
  std::map<std::string, double> s;
  {
    workers::PollBackoff backoff(std::chrono::milliseconds(200));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      s = Samples(Scrape(port));
      if (Get(s, "npuprof_workers") == 2) break;
      std::this_thread::sleep_for(backoff.Next());
    }
  }
  ASSERT_EQ(Get(s, "npuprof_workers"), 2);
  EXPECT_EQ(Get(s, "npuprof_worker_slots"), 16);  // 2 local workers x 8
  EXPECT_GT(Get(s, "process_start_time_seconds"), 1.6e9);
  EXPECT_GT(Get(s, "npuprof_store_size_bytes"), 0);
  EXPECT_EQ(Get(s, "npuprof_client_requests_total{verb=\"machine.add\",result=\"ok\"}"), 1);  // sim1
  const std::string first = Scrape(port);
  if (have_promtool) {
    EXPECT_EQ(Promtool(first, h.Dir()), "") << first;
  }

  std::vector<std::string> run_ids;
  for (int i = 1; i <= 3; ++i) {
    CliResult r = h.Cli({"submit", "probe", "--machine", "sim1", "--wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    run_ids.push_back(r.json().value("run_id", ""));
    s = Samples(Scrape(port));
    EXPECT_EQ(Get(s, "npuprof_runs_finished_total{kind=\"probe\",status=\"ok\"}"), i);
    EXPECT_EQ(Get(s, "npuprof_runs_submitted_total{kind=\"probe\"}"), i);
    EXPECT_EQ(Get(s, "npuprof_runs_active{kind=\"probe\"}"), 0);
    EXPECT_EQ(Get(s, "npuprof_task_attempts_total{kind=\"probe.npu_smi\"}"), i);
    EXPECT_EQ(Get(s, "npuprof_task_results_total{kind=\"probe.npu_smi\",outcome=\"succeeded\"}"), i);
    EXPECT_EQ(Get(s, "npuprof_task_duration_seconds_count{kind=\"probe.npu_smi\"}"), i);
    EXPECT_EQ(Get(s, "npuprof_task_duration_seconds_bucket{kind=\"probe.npu_smi\",le=\"+Inf\"}"), i);
    EXPECT_EQ(Get(s, "npuprof_client_requests_total{verb=\"submit\",result=\"ok\"}"), i);
  }

  // A machine nobody listens for: three attempts, two retries, then the run fails.
  CliResult add = h.Cli({"machine", "add", "dead", "--host", "127.0.0.1", "--port",
                         std::to_string(FreeLoopbackPort()), "--user", h.sshd().user(), "--identity",
                         h.sshd().identity_file(), "--known-hosts", h.sshd().known_hosts_file()});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  CliResult failed = h.Cli({"submit", "probe", "--machine", "dead", "--wait"});
  ASSERT_EQ(failed.exit_code, 1) << failed.err << failed.out;
  run_ids.push_back(failed.json().value("run_id", ""));
  const std::string last = Scrape(port);
  s = Samples(last);
  EXPECT_EQ(Get(s, "npuprof_runs_finished_total{kind=\"probe\",status=\"ok\"}"), 3);
  EXPECT_EQ(Get(s, "npuprof_runs_finished_total{kind=\"probe\",status=\"failed\"}"), 1);
  EXPECT_EQ(Get(s, "npuprof_runs_submitted_total{kind=\"probe\"}"), 4);
  EXPECT_EQ(Get(s, "npuprof_runs_active{kind=\"probe\"}"), 0);
  EXPECT_EQ(Get(s, "npuprof_task_attempts_total{kind=\"probe.npu_smi\"}"), 6);
  EXPECT_EQ(Get(s, "npuprof_task_retries_total{kind=\"probe.npu_smi\"}"), 2);
  EXPECT_EQ(Get(s, "npuprof_task_redispatches_total{kind=\"probe.npu_smi\",reason=\"retry\"}"), 2);
  EXPECT_EQ(Get(s, "npuprof_task_results_total{kind=\"probe.npu_smi\",outcome=\"retried\"}"), 2);
  EXPECT_EQ(Get(s, "npuprof_task_results_total{kind=\"probe.npu_smi\",outcome=\"failed\"}"), 1);
  EXPECT_EQ(Get(s, "npuprof_task_duration_seconds_count{kind=\"probe.npu_smi\"}"), 6);
  EXPECT_EQ(Get(s, "npuprof_client_requests_total{verb=\"submit\",result=\"ok\"}"), 4);
  EXPECT_EQ(Get(s, "npuprof_client_requests_total{verb=\"machine.add\",result=\"ok\"}"), 2);
  EXPECT_GT(Get(s, "npuprof_client_requests_total{verb=\"events\",result=\"ok\"}"), 0);  // --wait follows events
  size_t events = 0;  // every event of the four runs, as the store holds them
  for (const auto& id : run_ids) {
    const auto ev = h.Cli({"events", id, "--json"}).json();
    ASSERT_TRUE(ev.is_object()) << id;
    events += ev["events"].size();
  }
  EXPECT_EQ(Get(s, "npuprof_events_committed_total"), static_cast<double>(events));
  EXPECT_GT(Get(s, "npuprof_store_commit_duration_seconds_count"), 0);
  EXPECT_GT(Get(s, "npuprof_broker_loop_turns_total"), 0);
  if (have_promtool) {
    EXPECT_EQ(Promtool(last, h.Dir()), "") << last;
  } else {
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/setup.sh installs it): "
                    "the counters were checked, the exposition was not linted";
  }
}

TEST(MetricsE2E, BadOrNonLoopbackListenAddressIsAUsageError) {
  std::string dir = (std::filesystem::temp_directory_path() / "npuprof_metrics_usage_XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  NpuprofHarness h;
  CliResult r = h.CliRaw({"server", "--data-dir", dir, "--no-local-workers", "--metrics-listen", "9464"}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("expected HOST:PORT"), std::string::npos) << r.err;
  // Unauthenticated, so beyond loopback only when asked for explicitly: refused before the store is opened.
  r = h.CliRaw({"server", "--data-dir", dir, "--no-local-workers", "--metrics-listen", "0.0.0.0:0"}, 30);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not a loopback address"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--metrics-allow-remote"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/store")) << "a refused metrics address opened the store";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace npuprof::testing
