// Charts of HBM for the HTML views, drawn with views/svg.h. Pure: the same
// input gives the same SVG bytes.
//
//  * StackedHbmBars: one horizontal bar per device, one segment per HBM
//    component (colour fixed per component key, see ComponentColour), the
//    rest of the device's total HBM as a light "free" segment, a legend of
//    the components present, each segment's value in MB and % of the
//    device's used HBM on hover and, when it is wide enough, as a label.
//    Segments <= 0 MB are not drawn (a negative residual cannot be stacked;
//    the caller's table shows it).
//  * HbmTimeChart: HBM over time of one or more series, phase markers as
//    vertical lines (a point in time) or shaded spans (start and end) with
//    their labels, and the activation peak marked (its point, the level it
//    is measured from, the difference). Axis ticks in readable units (s or
//    min; MB or GiB). Long series are thinned per pixel column to the first,
//    lowest, highest and last sample of the column, so peaks are never lost.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace npuprof::views {

// ---- units and ticks ------------------------------------------------------

// Ticks covering [lo, hi]: multiples of 1, 2 or 5 x 10^k, about `target` of
// them, the first <= lo and the last >= hi. lo >= hi gives a small range
// around lo.
std::vector<double> NiceTicks(double lo, double hi, int target = 5);
// "512 MB", "1.5 GiB" (>= 1024 MB), "0 MB"; at most one decimal.
std::string FormatMbAxis(double mb);
// "0 s", "12.5 s", "3 min" (>= 120 s), at most one decimal.
std::string FormatSecondsAxis(double s);
// "15,360.5": one decimal, thousands separated by commas.
std::string FormatMbValue(double mb);

// The colour of an HBM component key ("weights", "kv_cache", ...; unknown
// keys get a neutral grey).
std::string ComponentColour(const std::string& key);

// ---- stacked bars ----------------------------------------------------------

struct BarSegment {
  std::string key;     // component key: colour and legend entry
  std::string label;   // shown in the legend and hover text
  double mb = 0;
};

struct DeviceBar {
  std::string label;             // "Device 0"
  std::optional<double> total_mb;
  std::optional<double> used_mb;  // the base of the segment percentages
  std::vector<BarSegment> segments;
};

struct BarChartWords {
  std::string free = "free";
  std::string used = "used";
  std::string total = "total";
};

std::string StackedHbmBars(const std::vector<DeviceBar>& bars, const BarChartWords& words = {});

// ---- HBM over time ---------------------------------------------------------

struct TimePoint {
  double t_s = 0;  // seconds from the chart's origin
  double mb = 0;
};

struct TimeLine {
  std::string label;
  std::string colour;  // empty: a colour by position
  std::vector<TimePoint> points;
};

struct TimePhase {
  std::string key;     // baseline, launch, ready, inference, stop, ...
  std::string label;
  double start_s = 0;
  std::optional<double> end_s;  // set: a shaded span
};

struct TimePeak {
  double t_s = 0;
  double mb = 0;                  // the highest sample
  std::optional<double> base_mb;  // the level the peak is measured from
  std::string label;              // e.g. "activation peak +1,024.0 MB"
};

struct TimeChartInput {
  std::string title;
  std::vector<TimeLine> lines;
  std::vector<TimePhase> phases;
  std::optional<TimePeak> peak;
  std::string x_label = "time";
  std::string y_label = "HBM";
};

std::string HbmTimeChart(const TimeChartInput& in);

// ---- latency distribution ---------------------------------------------------

// The p-th percentile (0..100) of `values` by the nearest-rank method (the
// smallest value with at least p% of the values <= it); nullopt when empty.
std::optional<double> NearestRankPercentile(std::vector<double> values, double p);

struct LatencySample {
  double ms = 0;
  bool ok = true;
  std::string label;  // hover text, e.g. "request 3: 200"
};

// The requests' latencies sorted ascending as vertical bars (failed
// requests in red), with horizontal lines at p50, p90 and p99.
std::string SortedLatencyChart(const std::vector<LatencySample>& samples, const std::string& title = {});

// The points kept when `points` (sorted by time) are drawn `columns` wide:
// per column the first, lowest, highest and last point, in time order.
std::vector<TimePoint> ThinForColumns(const std::vector<TimePoint>& points, int columns);

}  // namespace npuprof::views
