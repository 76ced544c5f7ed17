// Every task records its remote round trips (issue 42): a torch-profile run
// from the `npuprof` command against the simulated target, its host behind
// the test kit's latency relay (NpuprofHarness::SetLink, 10 ms round trips).
// `npuprof show` lists every attempt with its round trips (JSON and text),
// nonzero for every task that talks to the target, summing to the run's
// total; `npuprof trace` carries them in each task span's args; and the
// workers' count stays within a stated tolerance of the relay's turns
// (docs/PERFORMANCE.md "Far targets": why they differ). No timing bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <set>

#include <fmt/format.h>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

// The recorded count against the relay's turns over the run: within 25 %.
// The relay counts a turn for traffic neither side waited for (SSH window
// adjustments while the analyses' summaries stream; several channels
// talking at once); the count adds exchanges that overlap on one turn
// (parallel HTTP requests, two workers on two connections at once).
constexpr double kTolerance = 0.25;

TEST(TorchRoundTripsE2E, ShowAndTraceListEachTasksRoundTripsNearTheRelaysTurns) {
  NpuprofHarness h;
  h.SetLink({5000, 0});  // 5 ms each way
  ASSERT_TRUE(h.Start({}, 2).ok());
  const std::string model = h.MakeModel({"--kind", "dense", "--layers", "4"});
  ASSERT_FALSE(model.empty());
  ASSERT_NE(h.Relay(), nullptr);
  const RelayStats before = h.Relay()->Stats();
  CliResult r = h.Cli({"submit", "torch-profile", "--machine", "sim1", "--model", model, "--served-model-name", "qwen",
                       "--tp", "2", "--tag", "rts", "--mode", "enforce_eager", "--request-kind", "text",
                       "--benchmark-output-tokens", "4", "--prompt-tokens", "32", "--benchmark-total-requests", "4",
                       "--benchmark-concurrency", "2", "--flush-seconds", "0", "--health-timeout", "60",
                       "--profile-control-timeout", "30", "--request-timeout", "30", "--wait"},
                      200);
  const RelayStats after = h.Relay()->Stats();
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string run = r.json().value("run_id", "");
  ASSERT_FALSE(run.empty()) << r.out;

  CliResult show = h.Cli({"show", run});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const json s = show.json();
  ASSERT_TRUE(s.contains("tasks")) << show.out;
  ASSERT_TRUE(s["link_total"].is_object()) << s["link_total"].dump();
  int64_t sum = 0, handshakes = 0;
  std::set<std::string> kinds;
  for (const auto& t : s["tasks"]) {
    SCOPED_TRACE(t.dump());
    EXPECT_FALSE(t.value("kind", "").empty());
    EXPECT_EQ(t.value("machine", ""), "sim1");
    ASSERT_TRUE(t.contains("round_trips"));
    if (t["outcome"] != "succeeded" && t["outcome"] != "failed") continue;
    ASSERT_TRUE(t["round_trips"].is_number_integer());
    // Every task of a torch-profile run works on the target.
    EXPECT_GT(t["round_trips"].get<int64_t>(), 0);
    EXPECT_GE(t["link_ms"].get<int64_t>(), 0);
    EXPECT_TRUE(t["link"].is_object());
    sum += t["round_trips"].get<int64_t>();
    handshakes += t["link"].value("handshakes", int64_t{0});
    kinds.insert(t["kind"].get<std::string>());
    if (t["kind"] == "service.wait_ready" && t["outcome"] == "succeeded") {
      // The readiness wait runs on the target (ready_probe.h): no HTTP over
      // SSH, and one remote wait per slice (the service is ready within the
      // first), plus a connection's set-up when the wait opened one (its
      // handshake 5, the command shell's start 2).
      EXPECT_EQ(t["link"].value("http_requests", 0), 0);
      EXPECT_LE(t["round_trips"].get<int64_t>() - 5 * t["link"].value("handshakes", 0), 3);
    }
  }
  EXPECT_GE(kinds.size(), 4u);  // launch, wait, profile, analyse, stop...
  EXPECT_EQ(sum, s["link_total"]["round_trips"].get<int64_t>());
  EXPECT_EQ(s["link_total"]["unrecorded_attempts"], 0);

  const int64_t turns = static_cast<int64_t>(after.turns - before.turns);
  // The workers' pools warm a spare connection beside a long call
  // (workers/ssh/ssh_pool.h): its handshake and command shell start are on
  // no task's path, so no task records them. The relay sees each as a
  // connection no task's handshake accounts for.
  const int64_t connections = static_cast<int64_t>(after.connections - before.connections);
  const int64_t warm_ups = connections - handshakes;
  EXPECT_GE(warm_ups, 0) << connections << " connections, " << handshakes << " handshakes recorded by tasks";
  EXPECT_LE(warm_ups, 2) << "at most one spare per worker (2 workers) on a cold run";
  constexpr int64_t kWarmUpRoundTrips = 5 + 2;  // handshake and auth, the command shell's start
  const int64_t expected = sum + kWarmUpRoundTrips * warm_ups;
  std::cerr << "[round trips] recorded " << sum << " (+" << warm_ups << " warm-ups), relay turns " << turns
            << ", ratio " << static_cast<double>(expected) / static_cast<double>(std::max<int64_t>(turns, 1))
            << std::endl;
  EXPECT_GT(turns, 0);
  EXPECT_LE(std::abs(static_cast<double>(expected - turns)), kTolerance * static_cast<double>(turns))
      << "recorded " << sum << " round trips and " << warm_ups << " warm-ups, the relay saw " << turns << " turns";

  CliResult text = h.Cli({"show", run, "--text"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(fmt::format("total: {} round trips", sum)), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("round_trips"), std::string::npos) << text.out;

  const std::string trace_file = h.Dir() + "/rts.trace.json";
  CliResult trace = h.Cli({"trace", run, "-o", trace_file});
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  std::ifstream in(trace_file);
  const json doc = json::parse(in, nullptr, false);
  ASSERT_TRUE(doc.is_object());
  int64_t in_trace = 0;
  int spans = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args") || !e["args"].contains("round_trips")) continue;
    ++spans;
    if (e["args"]["round_trips"].is_number_integer()) in_trace += e["args"]["round_trips"].get<int64_t>();
  }
  EXPECT_GT(spans, 0);
  EXPECT_EQ(in_trace, sum);
}

}  // namespace
}  // namespace npuprof::testing
