#include "statemachine/hbm_drift.h"

#include <algorithm>
#include <array>
#include <cmath>

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

double HbmDriftTQuantile(int64_t dof) {
  // t_{0.999} for 1..30 degrees of freedom.
  static constexpr std::array<double, 30> kTable = {
      318.309, 22.327, 10.215, 7.173, 5.893, 5.208, 4.785, 4.501, 4.297, 4.144, 4.025, 3.930, 3.852, 3.787, 3.733,
      3.686,   3.646,  3.610,  3.579, 3.552, 3.527, 3.505, 3.485, 3.467, 3.450, 3.435, 3.421, 3.408, 3.396, 3.385};
  if (dof < 1) return kTable[0];
  if (dof <= 30) return kTable[static_cast<size_t>(dof - 1)];
  // Cornish-Fisher expansion of t around the normal quantile z_{0.999}.
  const double z = 3.090232306, v = static_cast<double>(dof);
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

HbmDriftEstimate EstimateHbmDrift(const HbmDriftSums& s) {
  HbmDriftEstimate e;
  e.samples = s.n;
  if (s.n < 2) return e;
  const double n = static_cast<double>(s.n);
  const double sxx = s.stt - s.st * s.st / n;
  if (!(sxx > 0)) return e;  // every sample at the same instant: no slope
  const double sxy = s.sty - s.st * s.sy / n;
  const double syy = s.syy - s.sy * s.sy / n;
  e.slope_mb_per_h = sxy / sxx;
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
