// The HBM drift estimator (statemachine/hbm_drift.h) on synthetic series:
// steady ones (constant, white noise, whole-MB quantisation, at 1 s, 10 s and
// 60 s intervals) are flagged at no prefix of 100 samples; a known leak is
// flagged within 10 samples with its slope within 10 %.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "statemachine/hbm_drift.h"

namespace npuprof::sm {
namespace {

struct Series {
  double interval_s;
  double base_mb;
  double slope_mb_per_h;
  double noise_sd_mb;
  double jitter_s;  // of the sample times
};

// Feeds n samples (npu-smi's whole MB) and returns the first sample count at
// which the verdict was growing (0 = never) and the last estimate.
std::pair<int64_t, HbmDriftEstimate> Feed(const Series& s, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, s.noise_sd_mb > 0 ? s.noise_sd_mb : 1);
  std::normal_distribution<double> jitter(0, s.jitter_s > 0 ? s.jitter_s : 1);
  HbmDriftSums sums;
  int64_t first = 0;
  HbmDriftEstimate e;
  double y0 = 0;
  for (int i = 0; i < n; ++i) {
    const double t_s = i * s.interval_s + (s.jitter_s > 0 ? jitter(rng) : 0);
    const double t_h = t_s / 3600;
    const double y = std::round(s.base_mb + s.slope_mb_per_h * t_h + (s.noise_sd_mb > 0 ? noise(rng) : 0));
    if (i == 0) y0 = y;
    sums.Add(t_h, y - y0);
    e = EstimateHbmDrift(sums);
    if (first == 0 && e.verdict == "growing") first = i + 1;
  }
  return {first, e};
}

TEST(HbmDriftQuantile, MatchesStudentsT) {
  // t_{0.99999} for 1, 2, 3, 8, 30, 100 degrees of freedom.
  EXPECT_NEAR(HbmDriftTQuantile(1), 31830.989, 0.01);
  EXPECT_NEAR(HbmDriftTQuantile(2), 223.603, 0.001);
  EXPECT_NEAR(HbmDriftTQuantile(3), 47.928, 0.001);
  EXPECT_NEAR(HbmDriftTQuantile(8), 8.907, 0.001);
  EXPECT_NEAR(HbmDriftTQuantile(30), 5.054, 0.001);
  EXPECT_NEAR(HbmDriftTQuantile(100), 4.478, 0.001);
  // The expansion past 1000 joins the exact form.
  EXPECT_NEAR(HbmDriftTQuantile(1000), HbmDriftTQuantile(1001), 1e-3);
  EXPECT_GT(HbmDriftTQuantile(1001), 4.2648);
}

TEST(HbmDrift, TooFewSamplesIsSteady) {
  HbmDriftSums s;
  EXPECT_EQ(EstimateHbmDrift(s).verdict, "steady");
  for (int i = 0; i < kHbmDriftMinSamples - 1; ++i) s.Add(i / 3600.0, i * 10.0);  // 36 GB/h, exact
  EXPECT_EQ(EstimateHbmDrift(s).verdict, "steady") << "fewer than the minimum number of samples";
  s.Add((kHbmDriftMinSamples - 1) / 3600.0, (kHbmDriftMinSamples - 1) * 10.0);
  EXPECT_EQ(EstimateHbmDrift(s).verdict, "growing");
  EXPECT_NEAR(EstimateHbmDrift(s).slope_mb_per_h, 36000, 1e-6);
}

TEST(HbmDrift, ConstantSeriesIsSteadyWithZeroSlope) {
  const auto [first, e] = Feed({1, 30000, 0, 0, 0}, 100, 1);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(e.slope_mb_per_h, 0);
  EXPECT_EQ(e.stderr_mb_per_h, 0);
  EXPECT_EQ(HbmDriftText(e), "steady");
}

TEST(HbmDrift, SteadyNoisySeriesIsNeverFlaggedIn100Samples) {
  // White noise around a level that sits on a half MB (quantisation flips it
  // between two whole MB), at the intervals a watch uses; 200 series each.
  const Series kinds[] = {{1, 30000.5, 0, 0.3, 0.05}, {1, 30000.5, 0, 2, 0.2}, {10, 61234.5, 0, 2, 0.2},
                          {60, 62000, 0, 20, 1}};
  for (const Series& k : kinds)
    for (uint32_t seed = 1; seed <= 200; ++seed) {
      const auto [first, e] = Feed(k, 100, seed);
      EXPECT_EQ(first, 0) << "interval " << k.interval_s << " s, noise " << k.noise_sd_mb << " MB, seed " << seed
                          << ": flagged growing at sample " << first;
    }
}

TEST(HbmDrift, SlowGrowthUnderTheThresholdIsSteady) {
  // 5 MB/h over 100 one-minute samples, noise-free: a real but slow rise
  // stays under the 10 MB/h threshold.
  const auto [first, e] = Feed({60, 40000, 5, 0, 0}, 100, 3);
  EXPECT_EQ(first, 0);
  EXPECT_NEAR(e.slope_mb_per_h, 5, 1.0);
}

TEST(HbmDrift, KnownLeakIsFlaggedWithin10SamplesWithin10Percent) {
  struct Leak {
    Series s;
    const char* what;
  };
  const Leak leaks[] = {{{1, 3000, 36000, 0, 0.2}, "10 MB/s at 1 s, times jittered 0.2 s"},
                        {{1, 3000, 36000, 1, 0.2}, "the same with 1 MB of noise"},
                        {{60, 62000, 2400, 2, 1}, "40 MB/min at 60 s"},
                        {{10, 30000, 3600, 0.5, 0.1}, "1 MB/s at 10 s"}};
  for (const Leak& l : leaks)
    for (uint32_t seed = 1; seed <= 50; ++seed) {
      const auto [first, e] = Feed(l.s, 10, seed);
      EXPECT_GT(first, 0) << l.what << ", seed " << seed << ": not flagged after 10 samples";
      EXPECT_LE(first, 10);
      EXPECT_EQ(e.verdict, "growing") << l.what;
      EXPECT_NEAR(e.slope_mb_per_h, l.s.slope_mb_per_h, 0.1 * l.s.slope_mb_per_h) << l.what << ", seed " << seed;
      EXPECT_LE(e.lower_mb_per_h, e.slope_mb_per_h);
      EXPECT_GE(e.upper_mb_per_h, e.slope_mb_per_h);
    }
}

TEST(HbmDrift, TextGivesTheSlope) {
  HbmDriftEstimate e;
  e.verdict = "growing";
  e.slope_mb_per_h = 123.456;
  EXPECT_EQ(HbmDriftText(e), "growing: +123.5 MB/h");
}

TEST(HbmDrift, FallingSeriesIsSteady) {
  const auto [first, e] = Feed({1, 30000, -36000, 0, 0}, 20, 1);
  EXPECT_EQ(first, 0);
  EXPECT_LT(e.slope_mb_per_h, 0);
}

}  // namespace
}  // namespace npuprof::sm
