#include "views/charts.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "views/svg.h"

namespace npuprof::views {

namespace {

bool Finite(double v) { return std::isfinite(v); }

std::string OneDecimal(double v) {
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

const char* const kLinePalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                    "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};

}  // namespace

// ---- units and ticks ------------------------------------------------------

std::vector<double> NiceTicks(double lo, double hi, int target) {
  if (!Finite(lo) || !Finite(hi)) return {0, 1};
  if (target < 1) target = 1;
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 0.1);
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  const double first = std::floor(lo / step);
  // Ticks rounded to the step's decimals: 3 x 0.2 is 0.6, not 0.6000000000000001.
  const double scale = std::pow(10.0, std::max(0.0, -std::floor(std::log10(step))));
  std::vector<double> ticks;
  for (int i = 0; i < 100; ++i) {
    const double v = std::round((first + i) * step * scale) / scale;
    ticks.push_back(v == 0 ? 0.0 : v);
    if (v >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::string FormatMbAxis(double mb) {
  if (!Finite(mb)) return "-";
  if (std::abs(mb) >= 1024) return OneDecimal(mb / 1024.0) + " GiB";
  return OneDecimal(mb) + " MB";
}

std::string FormatSecondsAxis(double s) {
  if (!Finite(s)) return "-";
  if (std::abs(s) >= 120) return OneDecimal(s / 60.0) + " min";
  return OneDecimal(s) + " s";
}

std::string FormatMbValue(double mb) {
  if (!Finite(mb)) return "-";
  std::string s = fmt::format("{:.1f}", mb);
  if (s == "-0.0") s = "0.0";
  const size_t dot = s.find('.');
  const size_t start = s[0] == '-' ? 1 : 0;
  for (int i = static_cast<int>(dot) - 3; i > static_cast<int>(start); i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string ComponentColour(const std::string& key) {
  static const std::map<std::string, std::string> kColours = {
      {"fixed_overhead", "#7f7f7f"}, {"weights", "#4e79a7"},      {"kv_cache", "#59a14f"},
      {"graph_capture", "#b07aa1"},  {"hccl", "#f28e2b"},         {"runtime", "#edc948"},
      {"slog", "#9c755f"},           {"msprof_other", "#76b7b2"}, {"activation_peak", "#e15759"},
      {"residual", "#bab0ac"}};
  auto it = kColours.find(key);
  return it == kColours.end() ? "#a0a0a0" : it->second;
}

// ---- stacked bars ----------------------------------------------------------

std::string StackedHbmBars(const std::vector<DeviceBar>& input, const BarChartWords& words) {
  constexpr double kWidth = 900, kLabelW = 120, kBarW = 760, kRowH = 44, kBarH = 24, kTop = 8;
  double scale_max = 0;
  std::vector<std::pair<std::string, std::string>> legend;  // key, label in first-seen order
  std::vector<DeviceBar> bars;
  for (DeviceBar b : input) {
    if (b.total_mb && !Finite(*b.total_mb)) b.total_mb.reset();
    if (b.used_mb && !Finite(*b.used_mb)) b.used_mb.reset();
    bars.push_back(std::move(b));
  }
  for (const auto& b : bars) {
    double sum = 0;
    for (const auto& s : b.segments) {
      if (!(s.mb > 0) || !Finite(s.mb)) continue;
      sum += s.mb;
      if (std::none_of(legend.begin(), legend.end(), [&](const auto& l) { return l.first == s.key; }))
        legend.emplace_back(s.key, s.label);
    }
    scale_max = std::max({scale_max, sum, b.total_mb.value_or(0), b.used_mb.value_or(0)});
  }
  if (!(scale_max > 0)) scale_max = 1;
  const double px_per_mb = kBarW / scale_max;

  // The legend wraps: items about 7 px per character plus the swatch.
  std::vector<std::pair<double, double>> legend_pos;
  double lx = kLabelW, ly = kTop + kRowH * static_cast<double>(bars.size()) + 16;
  for (const auto& [key, label] : legend) {
    const double w = 26 + 7.0 * static_cast<double>(label.size());
    if (lx + w > kWidth && lx > kLabelW) {
      lx = kLabelW;
      ly += 20;
    }
    legend_pos.emplace_back(lx, ly);
    lx += w;
  }
  const double height = (legend.empty() ? ly - 16 : ly + 12) + 8;

  Svg svg(kWidth, height, "HBM per device");
  for (size_t i = 0; i < bars.size(); ++i) {
    const DeviceBar& b = bars[i];
    const double y = kTop + kRowH * static_cast<double>(i);
    svg.Text(0, y + kBarH / 2, b.label, {.size = 13, .bold = true, .baseline = "middle"});
    std::string sub;
    if (b.used_mb) sub = FormatMbAxis(*b.used_mb);
    if (b.total_mb) sub += (sub.empty() ? "" : " / ") + FormatMbAxis(*b.total_mb);
    if (!sub.empty()) svg.Text(0, y + kBarH + 12, sub, {.size = 11, .fill = "#555"});
    double x = kLabelW, sum = 0;
    svg.BeginGroup("bar");
    for (const auto& s : b.segments) {
      if (!(s.mb > 0) || !Finite(s.mb)) continue;
      const double w = s.mb * px_per_mb;
      const std::string pct =
          b.used_mb && *b.used_mb > 0 ? fmt::format("{:.1f}%", s.mb / *b.used_mb * 100.0) : std::string();
      const std::string title =
          fmt::format("{}: {} MB{}", s.label, FormatMbValue(s.mb), pct.empty() ? "" : " (" + pct + ")");
      svg.Rect(x, y, w, kBarH, {.fill = ComponentColour(s.key), .stroke = "#fff", .stroke_width = 0.5}, title);
      if (w >= 48 && !pct.empty())
        svg.Text(x + w / 2, y + kBarH / 2, pct, {.size = 11, .anchor = "middle", .fill = "#fff", .baseline = "middle"});
      x += w;
      sum += s.mb;
    }
    if (b.total_mb && *b.total_mb > sum) {
      const double free_mb = *b.total_mb - sum;
      svg.Rect(x, y, free_mb * px_per_mb, kBarH, {.fill = "#ececec", .stroke = "#fff", .stroke_width = 0.5},
               fmt::format("{}: {} MB", words.free, FormatMbValue(free_mb)));
    }
    svg.EndGroup();
    if (b.used_mb && *b.used_mb > 0) {
      const double ux = kLabelW + *b.used_mb * px_per_mb;
      svg.Line(ux, y - 3, ux, y + kBarH + 3, {.stroke = "#222", .stroke_width = 1.5},
               fmt::format("{}: {} MB", words.used, FormatMbValue(*b.used_mb)));
    }
  }
  for (size_t i = 0; i < legend.size(); ++i) {
    const auto [x, y] = legend_pos[i];
    svg.Rect(x, y - 9, 12, 12, {.fill = ComponentColour(legend[i].first)});
    svg.Text(x + 16, y + 1, legend[i].second, {.size = 12});
  }
  return svg.Finish();
}

// ---- HBM over time ---------------------------------------------------------

std::vector<TimePoint> ThinForColumns(const std::vector<TimePoint>& points, int columns) {
  if (columns < 1 || points.size() <= static_cast<size_t>(columns) * 4) return points;
  const double t0 = points.front().t_s, t1 = points.back().t_s;
  const double span = t1 > t0 ? t1 - t0 : 1;
  std::vector<TimePoint> out;
  size_t i = 0;
  while (i < points.size()) {
    const int col = std::min(columns - 1, static_cast<int>((points[i].t_s - t0) / span * columns));
    size_t j = i, lo = i, hi = i;
    while (j < points.size() &&
           std::min(columns - 1, static_cast<int>((points[j].t_s - t0) / span * columns)) == col) {
      if (points[j].mb < points[lo].mb) lo = j;
      if (points[j].mb > points[hi].mb) hi = j;
      ++j;
    }
    std::vector<size_t> keep = {i, lo, hi, j - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t k : keep) out.push_back(points[k]);
    i = j;
  }
  return out;
}

namespace {

std::string PhaseColour(const std::string& key) {
  static const std::map<std::string, std::string> kColours = {
      {"baseline", "#7f7f7f"}, {"launch", "#4e79a7"},    {"ready", "#59a14f"},
      {"inference", "#e15759"}, {"stop", "#9c755f"}};
  auto it = kColours.find(key);
  return it == kColours.end() ? "#b07aa1" : it->second;
}

}  // namespace

std::string HbmTimeChart(const TimeChartInput& in) {
  constexpr double kW = 900, kH = 330, kL = 74, kR = 20, kT = 64, kB = 44;
  const double plot_w = kW - kL - kR, plot_h = kH - kT - kB;
  double t_lo = INFINITY, t_hi = -INFINITY, y_hi = 0;
  for (const auto& l : in.lines)
    for (const auto& p : l.points) {
      if (!Finite(p.t_s) || !Finite(p.mb)) continue;
      t_lo = std::min(t_lo, p.t_s);
      t_hi = std::max(t_hi, p.t_s);
      y_hi = std::max(y_hi, p.mb);
    }
  for (const auto& ph : in.phases) {
    if (!Finite(ph.start_s)) continue;
    t_lo = std::min(t_lo, ph.start_s);
    t_hi = std::max(t_hi, ph.end_s && Finite(*ph.end_s) ? *ph.end_s : ph.start_s);
  }
  if (in.peak) y_hi = std::max(y_hi, in.peak->mb);
  if (!Finite(t_lo)) t_lo = 0, t_hi = 1;
  if (!(t_hi > t_lo)) t_hi = t_lo + 1;

  const bool minutes = t_hi - t_lo >= 120;
  std::vector<double> x_ticks = minutes ? NiceTicks(t_lo / 60, t_hi / 60, 8) : NiceTicks(t_lo, t_hi, 8);
  if (minutes)
    for (double& v : x_ticks) v *= 60;
  const bool gib = y_hi >= 2048;
  std::vector<double> y_ticks = gib ? NiceTicks(0, y_hi * 1.05 / 1024, 5) : NiceTicks(0, y_hi * 1.05, 5);
  if (gib)
    for (double& v : y_ticks) v *= 1024;
  const double x_min = x_ticks.front(), x_max = x_ticks.back();
  const double y_max = y_ticks.back() > 0 ? y_ticks.back() : 1;
  auto X = [&](double t) { return kL + (t - x_min) / (x_max - x_min) * plot_w; };
  auto Y = [&](double mb) { return kT + plot_h - mb / y_max * plot_h; };

  Svg svg(kW, kH, in.title);
  if (!in.title.empty()) svg.Text(0, 14, in.title, {.size = 14, .bold = true});
  // Grid and axes.
  svg.BeginGroup("axes");
  for (double v : y_ticks) {
    svg.Line(kL, Y(v), kL + plot_w, Y(v), {.stroke = "#e4e4e4", .stroke_width = 1});
    svg.Text(kL - 6, Y(v), FormatMbAxis(v), {.size = 11, .anchor = "end", .fill = "#444", .baseline = "middle"});
  }
  for (double v : x_ticks) {
    svg.Line(X(v), kT + plot_h, X(v), kT + plot_h + 4, {.stroke = "#444", .stroke_width = 1});
    svg.Text(X(v), kT + plot_h + 17, FormatSecondsAxis(v), {.size = 11, .anchor = "middle", .fill = "#444"});
  }
  svg.Line(kL, kT + plot_h, kL + plot_w, kT + plot_h, {.stroke = "#444", .stroke_width = 1});
  svg.Line(kL, kT, kL, kT + plot_h, {.stroke = "#444", .stroke_width = 1});
  svg.Text(kL + plot_w / 2, kH - 4, in.x_label, {.size = 12, .anchor = "middle", .fill = "#444"});
  svg.Text(14, kT + plot_h / 2, in.y_label, {.size = 12, .anchor = "middle", .fill = "#444", .rotate = -90});
  svg.EndGroup();

  // Phases: spans shaded under the lines, labels in three staggered rows above the plot.
  std::vector<TimePhase> phases = in.phases;
  std::stable_sort(phases.begin(), phases.end(), [](const auto& a, const auto& b) { return a.start_s < b.start_s; });
  svg.BeginGroup("phases");
  int row = 0;
  for (const auto& ph : phases) {
    if (!Finite(ph.start_s)) continue;
    const std::string colour = PhaseColour(ph.key);
    const double x0 = X(ph.start_s);
    const double label_y = kT - 40 + 14 * row;
    row = (row + 1) % 3;
    if (ph.end_s && Finite(*ph.end_s) && *ph.end_s > ph.start_s) {
      svg.Rect(x0, kT, X(*ph.end_s) - x0, plot_h, {.fill = colour, .opacity = 0.14},
               fmt::format("{}: {} - {}", ph.label, FormatSecondsAxis(ph.start_s), FormatSecondsAxis(*ph.end_s)));
    } else {
      svg.Line(x0, kT, x0, kT + plot_h, {.stroke = colour, .stroke_width = 1.5, .dash = "5 3"},
               fmt::format("{}: {}", ph.label, FormatSecondsAxis(ph.start_s)));
    }
    svg.Line(x0, label_y + 3, x0, kT, {.stroke = colour, .stroke_width = 0.8});
    svg.Text(x0 + 3, label_y, ph.label, {.size = 11, .fill = colour, .bold = true});
  }
  svg.EndGroup();

  // Lines.
  svg.BeginGroup("series");
  for (size_t i = 0; i < in.lines.size(); ++i) {
    const TimeLine& l = in.lines[i];
    std::vector<TimePoint> pts;
    for (const auto& p : l.points)
      if (Finite(p.t_s) && Finite(p.mb)) pts.push_back(p);
    std::stable_sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.t_s < b.t_s; });
    pts = ThinForColumns(pts, static_cast<int>(plot_w));
    std::vector<SvgPoint> sp;
    sp.reserve(pts.size());
    for (const auto& p : pts) sp.push_back({X(p.t_s), Y(p.mb)});
    const std::string colour = l.colour.empty() ? kLinePalette[i % 8] : l.colour;
    svg.Polyline(sp, {.stroke = colour, .stroke_width = 1.6}, l.label);
    if (in.lines.size() > 1) {
      const double ly = kT + 12 + 14 * static_cast<double>(i);
      svg.Line(kL + plot_w - 120, ly - 4, kL + plot_w - 104, ly - 4, {.stroke = colour, .stroke_width = 2});
      svg.Text(kL + plot_w - 100, ly, l.label, {.size = 11});
    }
  }
  svg.EndGroup();

  if (in.peak && Finite(in.peak->t_s) && Finite(in.peak->mb)) {
    const TimePeak& p = *in.peak;
    svg.BeginGroup("peak", p.label);
    if (p.base_mb && Finite(*p.base_mb)) {
      svg.Line(kL, Y(*p.base_mb), kL + plot_w, Y(*p.base_mb), {.stroke = "#e15759", .stroke_width = 1, .dash = "2 3"});
      svg.Line(X(p.t_s), Y(*p.base_mb), X(p.t_s), Y(p.mb), {.stroke = "#e15759", .stroke_width = 2});
    }
    svg.Circle(X(p.t_s), Y(p.mb), 4.5, {.fill = "#e15759", .stroke = "#fff", .stroke_width = 1});
    const bool right_half = X(p.t_s) > kL + plot_w * 0.6;
    svg.Text(X(p.t_s) + (right_half ? -8 : 8), std::max(kT + 12, Y(p.mb) - 8), p.label,
             {.size = 12, .anchor = right_half ? "end" : "start", .fill = "#b22222", .bold = true});
    svg.EndGroup();
  }
  return svg.Finish();
}

// ---- latency distribution ---------------------------------------------------

std::optional<double> NearestRankPercentile(std::vector<double> values, double p) {
  std::erase_if(values, [](double v) { return !Finite(v); });
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(i, values.size() - 1)];
}

std::string SortedLatencyChart(const std::vector<LatencySample>& samples, const std::string& title) {
  constexpr double kW = 900, kH = 280, kL = 74, kR = 110, kT = 30, kB = 36;
  const double plot_w = kW - kL - kR, plot_h = kH - kT - kB;
  std::vector<LatencySample> sorted;
  for (const auto& s : samples)
    if (Finite(s.ms)) sorted.push_back(s);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.ms < b.ms; });
  double hi = 0;
  std::vector<double> all;
  for (const auto& s : sorted) {
    hi = std::max(hi, s.ms);
    all.push_back(s.ms);
  }
  const std::vector<double> ticks = NiceTicks(0, hi > 0 ? hi * 1.05 : 1, 5);
  const double y_max = ticks.back() > 0 ? ticks.back() : 1;
  auto Y = [&](double ms) { return kT + plot_h - ms / y_max * plot_h; };

  Svg svg(kW, kH, title.empty() ? std::string("latency") : title);
  if (!title.empty()) svg.Text(0, 14, title, {.size = 14, .bold = true});
  svg.BeginGroup("axes");
  for (double v : ticks) {
    svg.Line(kL, Y(v), kL + plot_w, Y(v), {.stroke = "#e4e4e4", .stroke_width = 1});
    svg.Text(kL - 6, Y(v), OneDecimal(v) + " ms", {.size = 11, .anchor = "end", .fill = "#444", .baseline = "middle"});
  }
  svg.Line(kL, kT + plot_h, kL + plot_w, kT + plot_h, {.stroke = "#444", .stroke_width = 1});
  svg.Text(kL + plot_w / 2, kH - 6, fmt::format("{} requests, sorted by latency", sorted.size()),
           {.size = 12, .anchor = "middle", .fill = "#444"});
  svg.EndGroup();
  const double slot = sorted.empty() ? plot_w : plot_w / static_cast<double>(sorted.size());
  const double bar = std::max(1.0, slot * 0.8);
  svg.BeginGroup("bars");
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& s = sorted[i];
    const std::string text = fmt::format("{}{} ms", s.label.empty() ? "" : s.label + ": ", OneDecimal(s.ms));
    svg.Rect(kL + slot * static_cast<double>(i) + (slot - bar) / 2, Y(s.ms), bar, kT + plot_h - Y(s.ms),
             {.fill = s.ok ? "#4e79a7" : "#e15759"}, text);
  }
  svg.EndGroup();
  // Percentile lines; percentiles of the same value share one line and label
  // ("p90, p99 73 ms"), labels closer than a line of text are pushed apart.
  struct Pct {
    std::string names;
    double ms;
    std::string colour;
  };
  std::vector<Pct> pcts;
  for (const auto& [p, colour] : std::vector<std::pair<double, std::string>>{
           {50, "#59a14f"}, {90, "#f28e2b"}, {99, "#b22222"}}) {
    auto v = NearestRankPercentile(all, p);
    if (!v) continue;
    if (!pcts.empty() && pcts.back().ms == *v) {
      pcts.back().names += fmt::format(", p{}", p);
      pcts.back().colour = colour;
    } else {
      pcts.push_back({fmt::format("p{}", p), *v, colour});
    }
  }
  svg.BeginGroup("percentiles");
  double last_label_y = INFINITY;
  for (const auto& p : pcts) {
    const std::string label = fmt::format("{} {} ms", p.names, OneDecimal(p.ms));
    svg.Line(kL, Y(p.ms), kL + plot_w, Y(p.ms), {.stroke = p.colour, .stroke_width = 1.2, .dash = "5 3"}, label);
    const double y = std::min(Y(p.ms), last_label_y - 13);
    svg.Text(kL + plot_w + 4, y, label, {.size = 11, .fill = p.colour, .baseline = "middle"});
    last_label_y = y;
  }
  svg.EndGroup();
  return svg.Finish();
}

}  // namespace npuprof::views
