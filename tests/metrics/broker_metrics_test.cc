// BrokerMetrics fed by hand: which committed events move which counter, the
// gauges of a loop turn, client verbs kept to a fixed set, and the result
// passing `promtool check metrics` (its linter: names, units, suffixes).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "broker/device_scheduler.h"
#include "broker/metrics.h"
#include "tests/metrics/promtool_check.h"
#include "broker/worker_registry.h"

namespace npuprof::broker {
namespace {

using json = nlohmann::json;

proto::Event Ev(const std::string& type, const json& payload) { return testing::MetricsEvent("r1", type, payload); }

sm::RunState ProbeRun() {
  sm::RunState s;
  s.run_id = "r1";
  s.kind = "probe";
  s.machine = "m1";
  sm::TaskInfo t;
  t.task_id = "r1.t1";
  t.kind = "probe.npu_smi";
  s.tasks[t.task_id] = t;
  return s;
}

// The sample line "name{labels} value" of the rendering, or "" when absent.
std::string Sample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  size_t at = text.rfind("\n" + prefix);
  if (at == std::string::npos) return "";
  at += 1 + prefix.size();
  return text.substr(at, text.find('\n', at) - at);
}

TEST(BrokerMetrics, CommittedEventsMoveRunAndTaskCounters) {
  BrokerMetrics m;
  const sm::RunState run = ProbeRun();
  for (const auto& e : {
           Ev("RunSubmitted", {{"kind", "probe"}, {"spec", json::object()}, {"machine", "m1"}}),
           Ev("StateChanged", {{"from", "queued"}, {"to", "probing"}}),
           Ev("TaskScheduled", {{"task_id", "r1.t1"}, {"kind", "probe.npu_smi"}, {"attempt", 1},
                                {"payload", {{"kind", "not this one"}}}}),
           Ev("TaskFailed", {{"task_id", "r1.t1"}, {"attempt", 1}, {"final", false}, {"retryable", true}}),
           Ev("TaskRetryScheduled", {{"task_id", "r1.t1"}, {"next_attempt", 2}}),
           Ev("TaskRedispatched", {{"task_id", "r1.t1"}, {"attempt", 2}, {"reason", "retry"}}),
           // A stored form that leaves false out: not final.
           Ev("TaskFailed", {{"task_id", "r1.t1"}, {"attempt", 2}}),
           Ev("TaskRedispatched", {{"task_id", "r1.t1"}, {"attempt", 3}, {"reason", "worker_lost"}}),
           Ev("TaskResultIgnored", {{"task_id", "r1.t1"}, {"attempt", 1}, {"reason", "stale attempt"}}),
           Ev("TaskSucceeded", {{"task_id", "r1.t1"}, {"attempt", 3}, {"result", {{"task_id", "x"}}}}),
           Ev("TaskAbandoned", {{"task_id", "r1.t9"}, {"reason", "run finished"}}),  // unknown task
           Ev("RunFinished", {{"status", "ok"}}),
       })
    m.EventCommitted(e, run);
  const std::string text = m.Render({});
  EXPECT_EQ(Sample(text, "npuprof_events_committed_total"), "12");
  EXPECT_EQ(Sample(text, "npuprof_runs_submitted_total{kind=\"probe\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_runs_finished_total{kind=\"probe\",status=\"ok\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_runs_active{kind=\"probe\"}"), "0");
  EXPECT_EQ(Sample(text, "npuprof_task_attempts_total{kind=\"probe.npu_smi\"}"), "3");
  EXPECT_EQ(Sample(text, "npuprof_task_retries_total{kind=\"probe.npu_smi\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_redispatches_total{kind=\"probe.npu_smi\",reason=\"retry\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_redispatches_total{kind=\"probe.npu_smi\",reason=\"worker_lost\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_results_total{kind=\"probe.npu_smi\",outcome=\"retried\"}"), "2");
  EXPECT_EQ(Sample(text, "npuprof_task_results_total{kind=\"probe.npu_smi\",outcome=\"succeeded\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_results_total{kind=\"probe.npu_smi\",outcome=\"failed\"}"), "");
  EXPECT_EQ(Sample(text, "npuprof_task_results_ignored_total"), "1");
  EXPECT_EQ(Sample(text, "npuprof_tasks_abandoned_total{kind=\"unknown\"}"), "1");
  EXPECT_EQ(text.find("not this one"), std::string::npos);
}

TEST(BrokerMetrics, RecoveredRunsCountAsActiveUntilTheyFinish) {
  BrokerMetrics m;
  sm::RunState serve;
  serve.kind = "serve";
  m.EventCommitted(Ev("RunRecovered", {{"outstanding_tasks", json::array()}}), serve);
  m.EventCommitted(Ev("TaskFailed", {{"task_id", "x"}, {"final", true}}), serve);
  std::string text = m.Render({});
  EXPECT_EQ(Sample(text, "npuprof_runs_recovered_total{kind=\"serve\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_runs_active{kind=\"serve\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_results_total{kind=\"unknown\",outcome=\"failed\"}"), "1");
  m.EventCommitted(Ev("RunFinished", {{"status", "failed"}, {"error", "service_died"}}), serve);
  text = m.Render({});
  EXPECT_EQ(Sample(text, "npuprof_runs_active{kind=\"serve\"}"), "0");
  EXPECT_EQ(Sample(text, "npuprof_runs_finished_total{kind=\"serve\",status=\"failed\"}"), "1");
}

TEST(BrokerMetrics, TurnGaugesTimingsAndClientVerbs) {
  BrokerMetrics m;
  DeviceScheduler leases;
  leases.Hold("a", "m1", {0, 1, 2});
  sm::LeaseInfo wants;
  sm::LeaseLeg leg;
  leg.machine = "m1";
  leg.devices = sm::DeviceIds{2};
  leg.count = 1;
  wants.legs.push_back(leg);
  leases.Wait("b", wants, 10);
  leases.Hold("c", "m2", {0});
  WorkerRegistry workers;
  workers.Upsert("w1").capacity = 8;
  workers.Upsert("w2").capacity = 4;
  m.TurnEnded(leases, workers, 5, 7);
  m.TaskAnswered("probe.npu_smi", std::chrono::milliseconds(30));
  m.TaskAnswered("probe.npu_smi", std::chrono::seconds(2));
  m.CommitTimed(std::chrono::microseconds(700));
  m.ClientAnswered("submit", true);
  m.ClientAnswered("submit", true);
  m.ClientAnswered("show", false);
  m.ClientAnswered("rm -rf /", false);
  m.ClientAnswered(std::string(1000, 'x'), false);
  m.ClientMalformed();
  metrics::ScrapeReadings r;
  r.store_size_bytes = 12345;
  r.process.start_time_seconds = 1700000000.5;
  const std::string text = m.Render(r);
  EXPECT_EQ(Sample(text, "npuprof_devices_leased{machine=\"m1\"}"), "3");
  EXPECT_EQ(Sample(text, "npuprof_devices_leased{machine=\"m2\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_runs_queued{machine=\"m1\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_runs_queued{machine=\"m2\"}"), "0");
  EXPECT_EQ(Sample(text, "npuprof_workers"), "2");
  EXPECT_EQ(Sample(text, "npuprof_worker_slots"), "12");
  EXPECT_EQ(Sample(text, "npuprof_worker_tasks_in_flight"), "5");
  EXPECT_EQ(Sample(text, "npuprof_tasks_pending"), "7");
  EXPECT_EQ(Sample(text, "npuprof_broker_loop_turns_total"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_duration_seconds_bucket{kind=\"probe.npu_smi\",le=\"0.025\"}"), "0");
  EXPECT_EQ(Sample(text, "npuprof_task_duration_seconds_bucket{kind=\"probe.npu_smi\",le=\"0.05\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_task_duration_seconds_bucket{kind=\"probe.npu_smi\",le=\"2.5\"}"), "2");
  EXPECT_EQ(Sample(text, "npuprof_task_duration_seconds_count{kind=\"probe.npu_smi\"}"), "2");
  EXPECT_EQ(Sample(text, "npuprof_store_commit_duration_seconds_bucket{le=\"0.001\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_store_commit_duration_seconds_count"), "1");
  EXPECT_EQ(Sample(text, "npuprof_client_requests_total{verb=\"submit\",result=\"ok\"}"), "2");
  EXPECT_EQ(Sample(text, "npuprof_client_requests_total{verb=\"show\",result=\"error\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_client_requests_total{verb=\"other\",result=\"error\"}"), "2");
  EXPECT_EQ(Sample(text, "npuprof_client_requests_total{verb=\"malformed\",result=\"error\"}"), "1");
  EXPECT_EQ(Sample(text, "npuprof_store_size_bytes"), "12345");
  EXPECT_EQ(Sample(text, "process_start_time_seconds"), "1700000000.5");
  EXPECT_EQ(text.find("rm -rf"), std::string::npos);
}

// The linter Prometheus ships. CI installs it (scripts/setup.sh); without it
// the test says so and is skipped.
TEST(BrokerMetrics, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/setup.sh installs it)";
  BrokerMetrics m;
  const sm::RunState run = ProbeRun();
  m.EventCommitted(Ev("RunSubmitted", {{"kind", "probe"}}), run);
  m.EventCommitted(Ev("TaskScheduled", {{"task_id", "r1.t1"}, {"kind", "probe.npu_smi"}}), run);
  m.EventCommitted(Ev("TaskRedispatched", {{"task_id", "r1.t1"}, {"reason", "recovery"}}), run);
  m.TaskAnswered("probe.npu_smi", std::chrono::milliseconds(12));
  m.ClientAnswered("runs", true);
  const std::string text = m.Render({metrics::ReadProcessReadings(), 4096.0});
  const auto verdict = testing::PromtoolCheck(text);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->passed) << verdict->output << "\n---\n" << text;
  EXPECT_EQ(verdict->output, "");
}

}  // namespace
}  // namespace npuprof::broker
