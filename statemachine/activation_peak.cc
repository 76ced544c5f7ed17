#include "statemachine/activation_peak.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace npuprof::sm {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

ActivationPeak Refuse(ActivationPeak p, const char* reason, std::string message) {
  p.ok = false;
  p.reason = reason;
  p.message = std::move(message);
  p.value_mb = 0;
  return p;
}

}  // namespace

ActivationPeak ActivationPeakFromSeries(std::vector<SeriesSample> samples, const std::optional<InferenceWindow>& window,
                                        const ActivationPeakOptions& o) {
  ActivationPeak out;
  std::erase_if(samples, [](const SeriesSample& s) { return !std::isfinite(s.t_us) || !std::isfinite(s.mb); });
  std::stable_sort(samples.begin(), samples.end(), [](const auto& a, const auto& b) { return a.t_us < b.t_us; });
  if (!window)
    return Refuse(out, "no_window",
                  "no inference window: the run recorded no inference request start and end, so the series "
                  "cannot be cut; the npu-smi delta is the only activation measurement");
  if (!std::isfinite(window->start_us) || !std::isfinite(window->end_us) || window->end_us < window->start_us)
    return Refuse(out, "invalid_window",
                  fmt::format("the inference window ends ({} us) before it starts ({} us)", window->end_us,
                              window->start_us));
  out.window_start_us = window->start_us - o.margin_us;
  out.window_end_us = window->end_us + o.margin_us;

  std::vector<double> intervals;
  for (size_t i = 1; i < samples.size(); ++i) intervals.push_back(samples[i].t_us - samples[i - 1].t_us);
  out.median_interval_us = Median(intervals);

  size_t first_in = samples.size(), last_in = samples.size();
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].t_us < out.window_start_us || samples[i].t_us > out.window_end_us) continue;
    if (first_in == samples.size()) first_in = i;
    last_in = i;
    out.window_samples.push_back(samples[i]);
  }
  for (size_t i = 0; i < samples.size() && samples[i].t_us < out.window_start_us; ++i)
    if (samples[i].t_us >= out.window_start_us - o.lookback_us &&
        (!o.base_not_before_us || samples[i].t_us >= *o.base_not_before_us))
      out.base_samples.push_back(samples[i]);
  if (out.base_samples.size() > o.base_samples)
    out.base_samples.erase(out.base_samples.begin(),
                           out.base_samples.end() - static_cast<std::ptrdiff_t>(o.base_samples));

  if (out.window_samples.empty())
    return Refuse(out, "no_samples_in_window",
                  fmt::format("no npu_mem sample between {:.0f} and {:.0f} us ({} samples in the series{}); was "
                              "msprof sampling memory while the request ran?",
                              out.window_start_us, out.window_end_us, samples.size(),
                              samples.empty() ? ""
                                              : fmt::format(", from {:.0f} to {:.0f} us", samples.front().t_us,
                                                            samples.back().t_us)));

  // Gaps: from the sample before the window through the window to the sample after it (or the window's end).
  const double allowed = std::max(o.max_gap_factor * out.median_interval_us, o.min_gap_us);
  const size_t from = first_in > 0 ? first_in - 1 : first_in;
  const size_t to = last_in + 1 < samples.size() ? last_in + 1 : last_in;
  double gap_at = 0;
  auto note_gap = [&](double a, double b) {
    if (b - a > out.largest_gap_us) {
      out.largest_gap_us = b - a;
      gap_at = a;
    }
  };
  if (first_in == 0) note_gap(out.window_start_us, samples[0].t_us);
  for (size_t i = from; i < to; ++i) note_gap(samples[i].t_us, samples[i + 1].t_us);
  if (last_in + 1 == samples.size()) note_gap(samples[last_in].t_us, out.window_end_us);

  auto peak = std::max_element(out.window_samples.begin(), out.window_samples.end(),
                               [](const auto& a, const auto& b) { return a.mb < b.mb; });
  out.peak = *peak;
  out.peak_mb = peak->mb;
  if (out.largest_gap_us > allowed)
    return Refuse(out, "gap",
                  fmt::format("the series has a gap of {:.0f} us at {:.0f} us around or inside the inference "
                              "window (allowed {:.0f} us = max({} x median interval {:.0f} us, {:.0f} us)); a peak "
                              "inside it would be missed",
                              out.largest_gap_us, gap_at, allowed, o.max_gap_factor, out.median_interval_us,
                              o.min_gap_us));
  if (out.base_samples.empty())
    return Refuse(out, "no_samples_before_window",
                  fmt::format("no npu_mem sample in the {:.0f} us before the inference window (from {:.0f} us){}: "
                              "the idle level is unknown",
                              o.lookback_us, out.window_start_us,
                              o.base_not_before_us
                                  ? fmt::format(" after the service was ready ({:.0f} us)", *o.base_not_before_us)
                                  : ""));
  std::vector<double> base;
  for (const auto& s : out.base_samples) base.push_back(s.mb);
  out.base_mb = Median(base);
  out.value_mb = std::max(0.0, out.peak_mb - out.base_mb);
  out.ok = true;
  return out;
}

json ActivationPeakToJson(const ActivationPeak& p) {
  json base_rows = json::array();
  for (const auto& s : p.base_samples) base_rows.push_back(s.row);
  json j = {{"ok", p.ok},
            {"reason", p.reason},
            {"message", p.message},
            {"value_mb", p.ok ? json(R3(p.value_mb)) : json(nullptr)},
            {"peak_mb", p.peak ? json(R3(p.peak_mb)) : json(nullptr)},
            {"base_mb", p.ok ? json(R3(p.base_mb)) : json(nullptr)},
            {"peak", p.peak ? json{{"t_us", p.peak->t_us}, {"mb", R3(p.peak->mb)}, {"row", p.peak->row}}
                            : json(nullptr)},
            {"base_rows", base_rows},
            {"window", {{"start_us", p.window_start_us}, {"end_us", p.window_end_us}}},
            {"window_rows", p.window_samples.empty()
                                ? json::array()
                                : json::array({p.window_samples.front().row, p.window_samples.back().row})},
            {"samples_in_window", p.window_samples.size()},
            {"median_interval_us", R3(p.median_interval_us)},
            {"largest_gap_us", R3(p.largest_gap_us)}};
  return j;
}

}  // namespace npuprof::sm
