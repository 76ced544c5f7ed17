// The HBM drift estimator of a watched serve run (`serve --watch-hbm`): the
// least-squares slope of each device's HBM use against time, in MB per hour,
// with a confidence bound from the residuals, and a verdict.
//
// The series is kept as running sums (HbmDriftSums: n, sum t, sum t^2, sum y,
// sum t*y, sum y^2, with t in hours since the first sample and y in MB minus
// the first sample's value), so the estimate over every sample stays exact
// however long the service runs, while the run's data keeps only the last
// samples as evidence (docs/BEHAVIOUR.md "HBM drift").
//
// Verdict:
//   growing  at least kHbmDriftMinSamples samples and the slope's lower
//            one-sided 99.999 % confidence bound (slope - t_{0.99999,n-2} *
//            se) exceeds kHbmDriftThresholdMbPerH;
//   steady   otherwise (too few samples, a flat or falling series, or one
//            too noisy to tell).
// se = sqrt(SSE / (n - 2) / Sxx), SSE the residual sum of squares. The
// confidence is high because the verdict is looked at after every sample (a
// steady series with white noise, 100 samples, is flagged at no prefix in
// simulations of thousands of series; a 99.9 % bound flagged about 1.5 %). A series
// whose residuals are all zero (npu-smi prints whole MB; a constant use
// repeats exactly) has se 0 and its slope itself is tested.
// Pure: no I/O, no clock.
#pragma once

#include <cstdint>
#include <string>

namespace npuprof::sm {

inline constexpr int64_t kHbmDriftMinSamples = 5;
inline constexpr double kHbmDriftThresholdMbPerH = 10.0;
inline constexpr double kHbmDriftConfidence = 0.99999;  // one-sided

// Running sums of one device's series (t hours since the first sample, y MB
// above the first sample's value).
struct HbmDriftSums {
  int64_t n = 0;
  double st = 0, stt = 0, sy = 0, sty = 0, syy = 0;
  void Add(double t_h, double y_mb);
};

struct HbmDriftEstimate {
  int64_t samples = 0;
  double slope_mb_per_h = 0;    // 0 with fewer than 2 samples or no time span
  double intercept_mb = 0;      // the fitted line at t = 0 (y: MB above the first sample; the mean with no slope)
  double stderr_mb_per_h = 0;   // 0 with fewer than 3 samples
  double lower_mb_per_h = 0;    // slope - t * stderr (the one-sided bound)
  double upper_mb_per_h = 0;    // slope + t * stderr
  std::string verdict = "steady";  // "steady" | "growing"
};

HbmDriftEstimate EstimateHbmDrift(const HbmDriftSums& sums);

// Student's t quantile at kHbmDriftConfidence (one-sided) for dof >= 1
// degrees of freedom: the distribution's closed form for integer dof
// inverted by bisection up to 1000, the Cornish-Fisher expansion beyond.
double HbmDriftTQuantile(int64_t dof);

// "steady" or "growing: +X MB/h" (X the slope, one decimal).
std::string HbmDriftText(const HbmDriftEstimate& e);

}  // namespace npuprof::sm
