// serve --watch-hbm on /metrics: each HbmSampled sets the watched devices'
// npuprof_service_hbm_used_bytes{run_id,machine,device}; the run's end drops
// them (the series stay bounded by the runs alive); promtool accepts it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "broker/metrics.h"
#include "tests/metrics/promtool_check.h"

namespace npuprof::broker {
namespace {

using json = nlohmann::json;

proto::Event Ev(const std::string& type, const json& payload) { return testing::MetricsEvent("r7", type, payload); }

sm::RunState ServeRun() {
  sm::RunState s;
  s.run_id = "r7";
  s.kind = "serve";
  s.machine = "m1";
  return s;
}

json Sampled(int64_t no, int64_t used0, int64_t used1) {
  return {{"sample_no", no},
          {"t_ms", 1700000000000 + no * 1000},
          {"clock", "target"},
          {"devices", {{{"device_id", 0}, {"used_mb", used0}, {"total_mb", 65536}},
                       {{"device_id", 1}, {"used_mb", used1}, {"total_mb", 65536}}}}};
}

std::string Sample(const std::string& text, const std::string& series) {
  const std::string prefix = series + " ";
  size_t at = text.rfind("\n" + prefix);
  if (at == std::string::npos) return "";
  at += 1 + prefix.size();
  return text.substr(at, text.find('\n', at) - at);
}

TEST(HbmWatchMetrics, LastSamplePerDeviceUntilTheRunEnds) {
  BrokerMetrics m;
  const sm::RunState run = ServeRun();
  m.EventCommitted(Ev("RunSubmitted", {{"kind", "serve"}}), run);
  m.EventCommitted(Ev("HbmSampled", Sampled(1, 30000, 100)), run);
  m.EventCommitted(Ev("HbmSampled", Sampled(2, 30010, 100)), run);
  std::string text = m.Render({});
  EXPECT_EQ(Sample(text, R"(npuprof_service_hbm_used_bytes{run_id="r7",machine="m1",device="0"})"),
            std::to_string(int64_t{30010} * 1024 * 1024));
  EXPECT_EQ(Sample(text, R"(npuprof_service_hbm_used_bytes{run_id="r7",machine="m1",device="1"})"),
            std::to_string(int64_t{100} * 1024 * 1024));
  // A payload that is not a sample moves nothing.
  m.EventCommitted(Ev("HbmSampled", {{"devices", "nope"}}), run);
  m.EventCommitted(Ev("RunFinished", {{"status", "ok"}}), run);
  text = m.Render({});
  EXPECT_EQ(text.find("npuprof_service_hbm_used_bytes{"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE npuprof_service_hbm_used_bytes gauge"), std::string::npos);
}

TEST(HbmWatchMetrics, PromtoolAcceptsTheExposition) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "promtool not installed (Debian package prometheus; scripts/setup.sh installs it)";
  BrokerMetrics m;
  const sm::RunState run = ServeRun();
  m.EventCommitted(Ev("RunSubmitted", {{"kind", "serve"}}), run);
  m.EventCommitted(Ev("HbmSampled", Sampled(1, 30000, 100)), run);
  const std::string text = m.Render({metrics::ReadProcessReadings(), 4096.0});
  const auto verdict = testing::PromtoolCheck(text);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->passed) << verdict->output << "\n---\n" << text;
  EXPECT_EQ(verdict->output, "");
}

}  // namespace
}  // namespace npuprof::broker
