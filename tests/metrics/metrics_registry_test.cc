// The Prometheus text exposition (format 0.0.4) of MetricsRegistry: escaping,
// histogram buckets, ordering, families without samples, names refused at
// declaration, and that updating an existing series does not allocate.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <stdexcept>

#include "broker/metrics_registry.h"

// Counts allocations of this test binary, so that "no allocation on the hot
// path" is checked rather than promised.
static std::atomic<long> g_allocations{0};
void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace npuprof::metrics {
namespace {

TEST(MetricsRegistry, CounterWithLabelsRendersHelpTypeAndSortedSeries) {
  MetricsRegistry r;
  auto& f = r.Add("x_runs_total", "Runs.", MetricType::kCounter, {"kind", "status"});
  f.With({"probe", "ok"}).Inc();
  f.With({"probe", "ok"}).Inc(2);
  f.With({"alpha", "failed"}).Inc();
  f.With({"probe", "failed"}).Inc(-5);  // counters only go up: created, stays 0
  EXPECT_EQ(r.Render(),
            "# HELP x_runs_total Runs.\n"
            "# TYPE x_runs_total counter\n"
            "x_runs_total{kind=\"alpha\",status=\"failed\"} 1\n"
            "x_runs_total{kind=\"probe\",status=\"failed\"} 0\n"
            "x_runs_total{kind=\"probe\",status=\"ok\"} 3\n");
}

TEST(MetricsRegistry, FamiliesRenderInDeclarationOrder) {
  MetricsRegistry r;
  r.Add("zz", "Last declared first.", MetricType::kGauge).Only().Set(-1.5);
  r.Add("aa_total", "Then this.", MetricType::kCounter).Only().Inc();
  EXPECT_EQ(r.Render(),
            "# HELP zz Last declared first.\n# TYPE zz gauge\nzz -1.5\n"
            "# HELP aa_total Then this.\n# TYPE aa_total counter\naa_total 1\n");
}

TEST(MetricsRegistry, EscapesHelpAndLabelValues) {
  MetricsRegistry r;
  auto& f = r.Add("x_info", "Back\\slash and\nnewline \"quoted\".", MetricType::kGauge, {"v"});
  f.With({"a\"b\\c\nd"}).Set(1);
  EXPECT_EQ(r.Render(),
            "# HELP x_info Back\\\\slash and\\nnewline \"quoted\".\n"
            "# TYPE x_info gauge\n"
            "x_info{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(MetricsRegistry, LabelValuesAreMadeValidUtf8) {
  MetricsRegistry r;
  auto& f = r.Add("x", "h", MetricType::kGauge, {"v"});
  f.With({std::string_view("ok\xff", 3)}).Set(1);
  EXPECT_NE(r.Render().find("x{v=\"ok\xEF\xBF\xBD\"} 1\n"), std::string::npos) << r.Render();
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry r;
  auto& f = r.Add("x_duration_seconds", "D.", MetricType::kHistogram, {"kind"}, {0.25, 1, 10});
  auto& s = f.With({"k"});
  for (double v : {0.125, 0.25, 0.5, 3.0, 100.0}) s.Observe(v);
  s.Observe(std::nan(""));  // ignored
  EXPECT_EQ(s.count(), 5u);
  EXPECT_EQ(r.Render(),
            "# HELP x_duration_seconds D.\n"
            "# TYPE x_duration_seconds histogram\n"
            "x_duration_seconds_bucket{kind=\"k\",le=\"0.25\"} 2\n"  // a value equal to a bound counts in it
            "x_duration_seconds_bucket{kind=\"k\",le=\"1\"} 3\n"
            "x_duration_seconds_bucket{kind=\"k\",le=\"10\"} 4\n"
            "x_duration_seconds_bucket{kind=\"k\",le=\"+Inf\"} 5\n"
            "x_duration_seconds_sum{kind=\"k\"} 103.875\n"
            "x_duration_seconds_count{kind=\"k\"} 5\n");
}

TEST(MetricsRegistry, HistogramWithoutLabelsHasItsSeriesFromTheStart) {
  MetricsRegistry r;
  r.Add("x_seconds", "D.", MetricType::kHistogram, {}, {0.5});
  EXPECT_EQ(r.Render(),
            "# HELP x_seconds D.\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"0.5\"} 0\nx_seconds_bucket{le=\"+Inf\"} 0\nx_seconds_sum 0\nx_seconds_count 0\n");
}

TEST(MetricsRegistry, LabelledFamilyWithNoSamplesYetRendersOnlyItsMetadata) {
  MetricsRegistry r;
  r.Add("x_total", "Nothing yet.", MetricType::kCounter, {"kind"});
  r.Add("y_seconds", "Nothing yet either.", MetricType::kHistogram, {"kind"}, {1});
  EXPECT_EQ(r.Render(),
            "# HELP x_total Nothing yet.\n# TYPE x_total counter\n"
            "# HELP y_seconds Nothing yet either.\n# TYPE y_seconds histogram\n");
}

TEST(MetricsRegistry, ValuesAreSpelledAsTheFormatWants) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(42), "42");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(1e-4), "0.0001");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  EXPECT_EQ(std::stod(FormatMetricValue(1.0 / 3)), 1.0 / 3);  // reads back exactly
}

TEST(MetricsRegistry, MissingLabelValuesAreEmptyAndExtraOnesIgnored) {
  MetricsRegistry r;
  auto& f = r.Add("x", "h", MetricType::kGauge, {"a", "b"});
  f.With({"1"}).Set(1);
  f.With({"1", "", "ignored"}).Add(1);  // the same series
  EXPECT_EQ(r.Render(), "# HELP x h\n# TYPE x gauge\nx{a=\"1\",b=\"\"} 2\n");
}

TEST(MetricsRegistry, ValuesThatShareAJoinedFormStayApart) {
  MetricsRegistry r;
  auto& f = r.Add("x", "h", MetricType::kGauge, {"a", "b"});
  f.With({"ab", "c"}).Set(1);
  f.With({"a", "bc"}).Set(2);
  EXPECT_EQ(r.Render(), "# HELP x h\n# TYPE x gauge\nx{a=\"a\",b=\"bc\"} 2\nx{a=\"ab\",b=\"c\"} 1\n");
}

TEST(MetricsRegistry, BadDeclarationsAreRefused) {
  MetricsRegistry r;
  EXPECT_THROW(r.Add("1abc", "h", MetricType::kGauge), std::invalid_argument);
  EXPECT_THROW(r.Add("a-b", "h", MetricType::kGauge), std::invalid_argument);
  EXPECT_THROW(r.Add("", "h", MetricType::kGauge), std::invalid_argument);
  EXPECT_THROW(r.Add("ok", "h", MetricType::kGauge, {"bad:label"}), std::invalid_argument);
  EXPECT_THROW(r.Add("ok", "h", MetricType::kGauge, {"__reserved"}), std::invalid_argument);
  EXPECT_THROW(r.Add("ok", "h", MetricType::kHistogram, {"le"}, {1}), std::invalid_argument);
  EXPECT_THROW(r.Add("ok", "h", MetricType::kHistogram, {}, {1, 1}), std::invalid_argument);
  EXPECT_THROW(r.Add("ok", "h", MetricType::kHistogram, {}, {std::numeric_limits<double>::infinity()}),
               std::invalid_argument);
  EXPECT_THROW(r.Add("ok", "h", MetricType::kGauge, {}, {1}), std::invalid_argument);
  r.Add("ns:ok_total", "colons are allowed in metric names", MetricType::kCounter);
  EXPECT_THROW(r.Add("ns:ok_total", "twice", MetricType::kCounter), std::invalid_argument);
}

TEST(MetricsRegistry, UpdatingAnExistingSeriesDoesNotAllocate) {
  MetricsRegistry r;
  auto& c = r.Add("x_total", "h", MetricType::kCounter, {"kind", "reason"});
  auto& h = r.Add("x_seconds", "h", MetricType::kHistogram, {"kind"}, {0.1, 1});
  const std::string kind = "torch_profile.analyse_rank";  // longer than any small-string buffer
  c.With({kind, "worker_lost"}).Inc();
  h.With({kind}).Observe(0.5);
  const long before = g_allocations.load();
  for (int i = 0; i < 1000; ++i) {
    c.With({kind, "worker_lost"}).Inc();
    h.With({kind}).Observe(0.01 * i);
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(c.With({kind, "worker_lost"}).value(), 1001);
}

}  // namespace
}  // namespace npuprof::metrics
