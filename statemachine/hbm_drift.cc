#include "statemachine/hbm_drift.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace npuprof::sm {

void HbmDriftSums::Add(double t_h, double y_mb) {
  ++n;
  st += t_h;
  stt += t_h * t_h;
  sy += y_mb;
  sty += t_h * y_mb;
  syy += y_mb * y_mb;
}

namespace {

// P(|T| < t) for Student's t with v (integer) degrees of freedom: the closed
// form of the distribution for integer v (a finite series in cos(theta),
// theta = atan(t / sqrt(v))).
double TwoSidedCdf(double t, int64_t v) {
  const double th = std::atan(t / std::sqrt(static_cast<double>(v)));
  const double c = std::cos(th), s = std::sin(th), c2 = c * c;
  if (v % 2 == 1) {
    if (v == 1) return 2 / std::numbers::pi * th;
    double term = c, acc = c;
    for (int64_t k = 3; k <= v - 2; k += 2) {
      term *= c2 * static_cast<double>(k - 1) / static_cast<double>(k);
      acc += term;
    }
    return 2 / std::numbers::pi * (th + s * acc);
  }
  double term = 1, acc = 1;
  for (int64_t k = 2; k <= v - 2; k += 2) {
    term *= c2 * static_cast<double>(k - 1) / static_cast<double>(k);
    acc += term;
  }
  return s * acc;
}

}  // namespace

double HbmDriftTQuantile(int64_t dof) {
  if (dof < 1) dof = 1;
  if (dof > 1000) {
    // Cornish-Fisher expansion around the normal quantile (exact to 1e-4 here).
    const double z = 4.264890794, v = static_cast<double>(dof);
    const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
    return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
           (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
  }
  // The bisection costs O(dof) per step; each thread keeps what it found
  // (1000 doubles at most), so a watch's fold of every sample stays O(1).
  thread_local std::array<double, 1001> known{};
  double& q = known[static_cast<size_t>(dof)];
  if (q > 0) return q;
  const double target = 2 * kHbmDriftConfidence - 1;
  double lo = 0, hi = 1e6;  // t_{0.99999} is 31831 at one degree of freedom
  for (int i = 0; i < 80; ++i) {
    const double mid = (lo + hi) / 2;
    (TwoSidedCdf(mid, dof) < target ? lo : hi) = mid;
  }
  return q = (lo + hi) / 2;
}

HbmDriftEstimate EstimateHbmDrift(const HbmDriftSums& s) {
  HbmDriftEstimate e;
  e.samples = s.n;
  if (s.n < 1) return e;
  const double n = static_cast<double>(s.n);
  e.intercept_mb = s.sy / n;
  if (s.n < 2) return e;
  const double sxx = s.stt - s.st * s.st / n;
  if (!(sxx > 0)) return e;  // every sample at the same instant: no slope
  const double sxy = s.sty - s.st * s.sy / n;
  const double syy = s.syy - s.sy * s.sy / n;
  e.slope_mb_per_h = sxy / sxx;
  e.intercept_mb = (s.sy - e.slope_mb_per_h * s.st) / n;
  e.lower_mb_per_h = e.upper_mb_per_h = e.slope_mb_per_h;
  if (s.n >= 3) {
    const double sse = std::max(0.0, syy - e.slope_mb_per_h * sxy);
    e.stderr_mb_per_h = std::sqrt(sse / (n - 2) / sxx);
    const double t = HbmDriftTQuantile(s.n - 2);
    e.lower_mb_per_h = e.slope_mb_per_h - t * e.stderr_mb_per_h;
    e.upper_mb_per_h = e.slope_mb_per_h + t * e.stderr_mb_per_h;
  }
  if (s.n >= kHbmDriftMinSamples && e.lower_mb_per_h > kHbmDriftThresholdMbPerH) e.verdict = "growing";
  return e;
}

std::string HbmDriftText(const HbmDriftEstimate& e) {
  if (e.verdict != "growing") return "steady";
  return fmt::format("growing: +{:.1f} MB/h", e.slope_mb_per_h);
}

}  // namespace npuprof::sm
