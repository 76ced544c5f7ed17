// The activation peak from an HBM series: retained and released activation
// memory, noise, missing samples, no window.
#include <gtest/gtest.h>

#include <cmath>

#include "statemachine/activation_peak.h"

namespace npuprof::sm {
namespace {

constexpr double kSec = 1e6;
constexpr double kT0 = 1.7e15;  // msprof writes µs since the epoch

// 50 Hz samples over [0, 20) s: idle until the request at 10 s, `peak`
// while it runs (10.0 - 10.3 s), then `after` (retained: the peak stays;
// released: back to idle).
std::vector<SeriesSample> Series(double idle, double peak, double after, double noise = 0) {
  std::vector<SeriesSample> s;
  uint32_t lcg = 12345;
  for (int i = 0; i < 1000; ++i) {
    const double t = i * 0.02;
    double mb = t < 10.0 ? idle : t < 10.3 ? peak : after;
    if (noise > 0) {
      lcg = lcg * 1664525u + 1013904223u;
      mb += noise * ((lcg >> 8) / double(1 << 24) * 2 - 1);  // deterministic, within +-noise
    }
    s.push_back({kT0 + t * kSec, mb, static_cast<size_t>(i + 1)});
  }
  return s;
}

// The request as the event log saw it, slightly off the 50 Hz grid.
const InferenceWindow kRequest{kT0 + 10.01 * kSec, kT0 + 10.31 * kSec};

TEST(ActivationPeak, RetainedActivationMemory) {
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 21536), kRequest);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_DOUBLE_EQ(p.value_mb, 1536);
  EXPECT_DOUBLE_EQ(p.peak_mb, 21536);
  EXPECT_DOUBLE_EQ(p.base_mb, 20000);
  EXPECT_TRUE(p.reason.empty());
}

TEST(ActivationPeak, ReleasedActivationMemoryIsStillSeen) {
  // The snapshot after the request sees idle again (npu-smi delta 0); the series saw the peak.
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 20000), kRequest);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_DOUBLE_EQ(p.value_mb, 1536);
  // Evidence: the peak sample is inside the request, with its CSV row; the
  // level is the median of the last 10 samples before the widened window.
  ASSERT_TRUE(p.peak.has_value());
  EXPECT_GE(p.peak->t_us, kT0 + 10.0 * kSec);
  EXPECT_LT(p.peak->t_us, kT0 + 10.3 * kSec);
  EXPECT_EQ(p.peak->row, static_cast<size_t>(std::lround((p.peak->t_us - kT0) / kSec / 0.02)) + 1);
  ASSERT_EQ(p.base_samples.size(), 10u);
  EXPECT_LT(p.base_samples.back().t_us, p.window_start_us);
  EXPECT_DOUBLE_EQ(p.window_start_us, kRequest.start_us - 200'000);
  EXPECT_DOUBLE_EQ(p.window_end_us, kRequest.end_us + 200'000);
  // 9.81 .. 10.51 s at 50 Hz: the samples 9.82 .. 10.50 s.
  EXPECT_EQ(p.window_samples.size(), 35u);
  EXPECT_NEAR(p.median_interval_us, 20'000, 1);
  const json j = ActivationPeakToJson(p);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["value_mb"], 1536.0);
  EXPECT_EQ(j["peak"]["row"], p.peak->row);
  EXPECT_EQ(j["base_rows"].size(), 10u);
  EXPECT_EQ(j["window_rows"][0], p.window_samples.front().row);
  EXPECT_EQ(j["samples_in_window"], 35);
}

TEST(ActivationPeak, NoisySeriesWithinTheNoise) {
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 20000, 4.0), kRequest);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_NEAR(p.value_mb, 1536, 8.0);
  EXPECT_NEAR(p.base_mb, 20000, 4.0);
}

TEST(ActivationPeak, NoActivationGivesZeroNotNegative) {
  auto p = ActivationPeakFromSeries(Series(20000, 19990, 19990), kRequest);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_EQ(p.value_mb, 0);
}

TEST(ActivationPeak, UnsortedAndNonFiniteSamplesAreTolerated) {
  auto s = Series(20000, 21536, 20000);
  std::reverse(s.begin(), s.end());
  s.push_back({NAN, 99999, 5000});
  s.push_back({kT0 + 10.1 * kSec, INFINITY, 5001});
  auto p = ActivationPeakFromSeries(s, kRequest);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_DOUBLE_EQ(p.value_mb, 1536);
}

TEST(ActivationPeak, MissingSamplesInsideTheWindowAreAGap) {
  auto s = Series(20000, 21536, 20000);
  std::erase_if(s, [](const SeriesSample& x) { return x.t_us > kT0 + 9.95 * kSec && x.t_us < kT0 + 10.4 * kSec; });
  auto p = ActivationPeakFromSeries(s, kRequest);
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "gap");
  EXPECT_NE(p.message.find("gap of"), std::string::npos) << p.message;
  EXPECT_GT(p.largest_gap_us, 400'000);
  EXPECT_EQ(p.value_mb, 0);
  EXPECT_EQ(ActivationPeakToJson(p)["value_mb"], nullptr);
}

TEST(ActivationPeak, SeriesEndingInsideTheWindowIsAGap) {
  auto s = Series(20000, 21536, 20000);
  std::erase_if(s, [](const SeriesSample& x) { return x.t_us > kT0 + 10.1 * kSec; });
  auto p = ActivationPeakFromSeries(s, kRequest);
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "gap") << p.message;
}

TEST(ActivationPeak, ASingleDroppedSampleIsNoGap) {
  auto s = Series(20000, 21536, 20000);
  std::erase_if(s, [](const SeriesSample& x) { return x.row == 506; });
  auto p = ActivationPeakFromSeries(s, kRequest);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_DOUBLE_EQ(p.value_mb, 1536);
}

TEST(ActivationPeak, NoWindow) {
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 20000), std::nullopt);
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "no_window");
  EXPECT_NE(p.message.find("npu-smi delta"), std::string::npos);
}

TEST(ActivationPeak, InvalidWindow) {
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 20000), InferenceWindow{kRequest.end_us, kRequest.start_us});
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "invalid_window");
}

TEST(ActivationPeak, WindowOutsideTheSeries) {
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 20000),
                                    InferenceWindow{kT0 + 60 * kSec, kT0 + 61 * kSec});
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "no_samples_in_window");
  EXPECT_NE(p.message.find("1000 samples"), std::string::npos) << p.message;
  auto empty = ActivationPeakFromSeries({}, kRequest);
  EXPECT_EQ(empty.reason, "no_samples_in_window");
}

TEST(ActivationPeak, NoSamplesBeforeTheWindow) {
  auto s = Series(20000, 21536, 20000);
  std::erase_if(s, [](const SeriesSample& x) { return x.t_us < kT0 + 9.815 * kSec; });
  auto p = ActivationPeakFromSeries(s, kRequest);
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.reason, "no_samples_before_window") << p.message;
  // The peak is still reported for the reader; the value is not.
  EXPECT_DOUBLE_EQ(p.peak_mb, 21536);
  EXPECT_EQ(p.value_mb, 0);
}

TEST(ActivationPeak, OptionsWidenTheMarginAndLevel) {
  ActivationPeakOptions o;
  o.margin_us = 0;
  o.base_samples = 3;
  auto p = ActivationPeakFromSeries(Series(20000, 21536, 20000), kRequest, o);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_EQ(p.base_samples.size(), 3u);
  EXPECT_EQ(p.window_samples.size(), 15u);  // 10.02 .. 10.30 s at 50 Hz
}

TEST(ActivationPeak, LevelIsTakenAfterTheServiceWasReady) {
  // Start-up level (graphs still capturing, 19500 MB) until 9.9 s, ready
  // (20000 MB) from then: 0.11 s of ready samples before the request. Without
  // the ready bound the level's median is mostly start-up samples.
  auto series = Series(20000, 21536, 20000);
  for (auto& s : series)
    if (s.t_us < kT0 + 9.9 * kSec) s.mb = 19500;
  auto loose = ActivationPeakFromSeries(series, kRequest);
  ASSERT_TRUE(loose.ok) << loose.message;
  EXPECT_DOUBLE_EQ(loose.base_mb, 19500);
  ActivationPeakOptions o;
  o.margin_us = 0;
  o.base_not_before_us = kT0 + 9.9 * kSec;
  auto p = ActivationPeakFromSeries(series, kRequest, o);
  ASSERT_TRUE(p.ok) << p.message;
  EXPECT_DOUBLE_EQ(p.base_mb, 20000);
  EXPECT_DOUBLE_EQ(p.value_mb, 1536);
  for (const auto& b : p.base_samples) EXPECT_GE(b.t_us, kT0 + 9.9 * kSec);
  // Ready only once the request started: no idle level to measure from.
  o.base_not_before_us = kT0 + 10.05 * kSec;
  auto none = ActivationPeakFromSeries(series, kRequest, o);
  EXPECT_FALSE(none.ok);
  EXPECT_EQ(none.reason, "no_samples_before_window");
  EXPECT_NE(none.message.find("after the service was ready"), std::string::npos) << none.message;
}

}  // namespace
}  // namespace npuprof::sm
