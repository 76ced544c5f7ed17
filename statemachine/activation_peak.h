// The activation peak of one device from its HBM time series (msprof
// npu_mem, sampled at --sys-hardware-mem-freq, 50 Hz by default). Pure.
//
// The workflow defines the activation peak as HBM during inference minus HBM
// at idle. An npu-smi snapshot after the request misses it whenever the
// allocator gave the memory back before the snapshot; the series saw it.
//
//   window  = the inference request's [start, end] (from the event log, on
//             the series' clock), widened by `margin_us` on both sides;
//   peak    = the highest sample inside the widened window;
//   level   = the median of the last `base_samples` samples taken within
//             `lookback_us` before the widened window ("just before it"),
//             and not before `base_not_before_us` when set (the service's
//             ready instant: earlier samples are start-up levels);
//   value   = max(0, peak - level).
//
// The value is refused (ok=false, `reason` a stable key, `message` the
// details and what to do) when there is no window (`no_window`), the window
// ends before it starts (`invalid_window`), no sample lies inside the window
// (`no_samples_in_window`) or just before it (`no_samples_before_window`),
// or the samples around and inside the window have a gap longer than
// max(max_gap_factor x the series' median interval, min_gap_us) (`gap`: a
// peak inside the gap would be missed). Samples need not be sorted;
// non-finite ones are dropped. The result lists every sample it used, with
// its CSV row, so the report can cite them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/run_state.h"

namespace npuprof::sm {

struct SeriesSample {
  double t_us = 0;
  double mb = 0;
  size_t row = 0;  // 1-based data row in the CSV (0 = unknown)
};

struct InferenceWindow {
  double start_us = 0;
  double end_us = 0;
};

struct ActivationPeakOptions {
  double margin_us = 200'000;
  double lookback_us = 2'000'000;
  size_t base_samples = 10;
  double max_gap_factor = 5;
  double min_gap_us = 100'000;
  std::optional<double> base_not_before_us;
};

struct ActivationPeak {
  bool ok = false;
  std::string reason;   // "" when ok; see above
  std::string message;
  double value_mb = 0;  // max(0, peak_mb - base_mb) when ok
  double peak_mb = 0;
  double base_mb = 0;
  std::optional<SeriesSample> peak;          // the highest sample in the window
  std::vector<SeriesSample> base_samples;    // the level is their median
  std::vector<SeriesSample> window_samples;  // every sample inside the widened window
  double window_start_us = 0;                // widened
  double window_end_us = 0;
  double median_interval_us = 0;
  double largest_gap_us = 0;                 // around and inside the window
};

ActivationPeak ActivationPeakFromSeries(std::vector<SeriesSample> samples, const std::optional<InferenceWindow>& window,
                                        const ActivationPeakOptions& options = {});

// {"ok", "reason", "message", "value_mb", "peak_mb", "base_mb", "peak": {t_us,
// mb, row}, "base_rows": [..], "window": {start_us, end_us}, "window_rows":
// [first, last], "samples_in_window", "median_interval_us",
// "largest_gap_us"} — the evidence form for the report.
json ActivationPeakToJson(const ActivationPeak& peak);

}  // namespace npuprof::sm
