// Charts: ticks and units, stacked HBM bars, the HBM curve with phases and
// the activation peak, thinning, the latency distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>

#include "views/charts.h"

namespace npuprof::views {
namespace {

// A number attribute or text written as nan/inf.
bool HasNonFinite(const std::string& svg) {
  static const std::regex kBad("(=\"|>|,| )-?(nan|inf)", std::regex::icase);
  return std::regex_search(svg, kBad);
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

TEST(NiceTicks, RoundStepsCoveringTheRange) {
  EXPECT_EQ(NiceTicks(0, 97, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(NiceTicks(0, 1, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(NiceTicks(3.2, 17.9, 3), (std::vector<double>{0, 5, 10, 15, 20}));
  EXPECT_LE(NiceTicks(65536, 65536, 5).front(), 65536);  // empty range: a small one around it
  EXPECT_GT(NiceTicks(65536, 65536, 5).back(), 65536);
  EXPECT_EQ(NiceTicks(0, 0, 5), (std::vector<double>{0, 0.2, 0.4, 0.6, 0.8, 1}));
  EXPECT_EQ(NiceTicks(NAN, 1), (std::vector<double>{0, 1}));
  for (double hi : {0.003, 7.0, 1234.0, 6.5e4, 2.4e9}) {
    auto t = NiceTicks(0, hi, 5);
    EXPECT_LE(t.front(), 0);
    EXPECT_GE(t.back(), hi);
    EXPECT_LE(t.size(), 12u) << hi;
  }
}

TEST(Units, ReadableAxisAndValueText) {
  EXPECT_EQ(FormatMbAxis(512), "512 MB");
  EXPECT_EQ(FormatMbAxis(1536), "1.5 GiB");
  EXPECT_EQ(FormatMbAxis(65536), "64 GiB");
  EXPECT_EQ(FormatMbAxis(0), "0 MB");
  EXPECT_EQ(FormatSecondsAxis(12.5), "12.5 s");
  EXPECT_EQ(FormatSecondsAxis(0), "0 s");
  EXPECT_EQ(FormatSecondsAxis(180), "3 min");
  EXPECT_EQ(FormatMbValue(15360.54), "15,360.5");
  EXPECT_EQ(FormatMbValue(1234567.0), "1,234,567.0");
  EXPECT_EQ(FormatMbValue(-2048), "-2,048.0");
  EXPECT_EQ(FormatMbValue(999.96), "1,000.0");
  EXPECT_EQ(FormatMbValue(-0.01), "0.0");
  EXPECT_EQ(FormatMbValue(NAN), "-");
}

TEST(ComponentColour, FixedPerKeyGreyOtherwise) {
  EXPECT_EQ(ComponentColour("weights"), "#4e79a7");
  EXPECT_EQ(ComponentColour("activation_peak"), "#e15759");
  EXPECT_EQ(ComponentColour("something_new"), "#a0a0a0");
  EXPECT_NE(ComponentColour("kv_cache"), ComponentColour("weights"));
}

TEST(StackedHbmBars, SegmentsLegendFreeAndUsed) {
  DeviceBar d0{"Device 0", 65536.0, 40000.0,
               {{"fixed_overhead", "Fixed", 3000}, {"weights", "Model weights", 16000},
                {"kv_cache", "KV cache", 20000}, {"residual", "Residual", -120}, {"activation_peak", "Act", 0}}};
  DeviceBar d1{"Device 1", std::nullopt, std::nullopt, {{"weights", "Model weights", 16000}}};
  const std::string svg = StackedHbmBars({d0, d1}, {"free", "used", "total"});
  EXPECT_TRUE(svg.starts_with("<svg ")) << svg;
  // Values in MB and % of used on hover; the negative residual and the zero segment are not drawn.
  EXPECT_NE(svg.find("<title>Model weights: 16,000.0 MB (40.0%)</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>KV cache: 20,000.0 MB (50.0%)</title>"), std::string::npos);
  EXPECT_EQ(svg.find("Residual"), std::string::npos);
  EXPECT_EQ(svg.find("Act"), std::string::npos);
  // The rest of the total is free; the used line is marked.
  EXPECT_NE(svg.find("<title>free: 26,536.0 MB</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>used: 40,000.0 MB</title>"), std::string::npos);
  // Legend: one entry per component drawn, in first-seen order.
  EXPECT_EQ(Count(svg, ">Model weights</text>"), 1u);
  EXPECT_LT(svg.find(">Fixed</text>"), svg.find(">KV cache</text>"));
  EXPECT_NE(svg.find(">Device 1</text>"), std::string::npos);
  // A wide segment carries its percentage as a label.
  EXPECT_NE(svg.find(">50.0%</text>"), std::string::npos);
  // Deterministic.
  EXPECT_EQ(svg, StackedHbmBars({d0, d1}, {"free", "used", "total"}));
}

TEST(StackedHbmBars, EmptyAndDegenerateInputsStillDraw) {
  EXPECT_TRUE(StackedHbmBars({}).starts_with("<svg "));
  DeviceBar nan_bar{"D", NAN, std::nullopt, {{"weights", "W", NAN}}};
  const std::string svg = StackedHbmBars({nan_bar});
  EXPECT_FALSE(HasNonFinite(svg)) << svg;
}

TEST(HbmTimeChart, LinePhasesAndPeak) {
  TimeChartInput in;
  in.title = "Device 0";
  TimeLine line{"Device 0 (Device)", "", {}};
  for (int i = 0; i <= 100; ++i) line.points.push_back({i * 0.1, i >= 50 && i < 60 ? 3000.0 : 2000.0});
  in.lines.push_back(line);
  in.phases = {{"ready", "ready", 2.0, std::nullopt}, {"inference", "inference window", 5.0, 6.0},
               {"baseline", "baseline", 0.0, std::nullopt}};
  in.peak = TimePeak{5.0, 3000.0, 2000.0, "activation peak +1,000.0 MB"};
  const std::string svg = HbmTimeChart(in);
  EXPECT_NE(svg.find(">Device 0</text>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<polyline"), 1u);
  EXPECT_NE(svg.find("<title>Device 0 (Device)</title>"), std::string::npos);
  // A span is shaded, a point is a dashed line; both labelled.
  EXPECT_NE(svg.find("<title>inference window: 5 s - 6 s</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>ready: 2 s</title>"), std::string::npos);
  EXPECT_NE(svg.find(">baseline</text>"), std::string::npos);
  EXPECT_NE(svg.find(">activation peak +1,000.0 MB</text>"), std::string::npos);
  // Axis ticks in readable units: seconds and GiB (the maximum is above 2 GiB).
  EXPECT_NE(svg.find(">10 s</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(" GiB</text>"), std::string::npos);
  EXPECT_EQ(svg, HbmTimeChart(in));
}

TEST(HbmTimeChart, MinutesForLongRunsAndNoDataAtAll) {
  TimeChartInput in;
  in.lines.push_back({"a", "#000", {{0, 100}, {600, 120}}});
  const std::string svg = HbmTimeChart(in);
  EXPECT_NE(svg.find(" min</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(" MB</text>"), std::string::npos);
  TimeChartInput empty;
  const std::string e = HbmTimeChart(empty);
  EXPECT_TRUE(e.starts_with("<svg ")) << e;
  EXPECT_FALSE(HasNonFinite(e)) << e;
  EXPECT_TRUE(HasNonFinite("<text x=\"nan\">"));  // the check itself
}

TEST(ThinForColumns, KeepsExtremesAndEnds) {
  std::vector<TimePoint> pts;
  for (int i = 0; i < 100000; ++i) pts.push_back({i * 0.001, 1000.0 + (i % 7)});
  pts[54321].mb = 99999;  // one spike
  pts[12345].mb = 1;      // one dip
  auto thin = ThinForColumns(pts, 800);
  EXPECT_LE(thin.size(), 800u * 4);
  EXPECT_EQ(thin.front().t_s, pts.front().t_s);
  EXPECT_EQ(thin.back().t_s, pts.back().t_s);
  double hi = 0, lo = 1e9;
  for (size_t i = 0; i < thin.size(); ++i) {
    hi = std::max(hi, thin[i].mb);
    lo = std::min(lo, thin[i].mb);
    if (i > 0) {
      EXPECT_LE(thin[i - 1].t_s, thin[i].t_s);
    }
  }
  EXPECT_EQ(hi, 99999);
  EXPECT_EQ(lo, 1);
  // Short series are kept whole.
  std::vector<TimePoint> few = {{0, 1}, {1, 2}, {2, 3}};
  EXPECT_EQ(ThinForColumns(few, 800).size(), 3u);
}

TEST(NearestRankPercentile, DefinitionAndEdges) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(101 - i);  // unsorted
  EXPECT_EQ(*NearestRankPercentile(v, 50), 50);
  EXPECT_EQ(*NearestRankPercentile(v, 90), 90);
  EXPECT_EQ(*NearestRankPercentile(v, 99), 99);
  EXPECT_EQ(*NearestRankPercentile(v, 100), 100);
  EXPECT_EQ(*NearestRankPercentile(v, 0), 1);
  EXPECT_EQ(*NearestRankPercentile({7, 3, 5}, 50), 5);
  EXPECT_EQ(*NearestRankPercentile({7, 3, 5}, 99), 7);
  EXPECT_EQ(*NearestRankPercentile({42}, 90), 42);
  EXPECT_FALSE(NearestRankPercentile({}, 50).has_value());
  EXPECT_FALSE(NearestRankPercentile({NAN}, 50).has_value());
}

TEST(SortedLatencyChart, BarsSortedFailedMarkedPercentileLines) {
  std::vector<LatencySample> s = {{120, true, "#0 200"}, {80, true, "#1 200"}, {300, false, "#2 failed"}};
  const std::string svg = SortedLatencyChart(s, "latency");
  EXPECT_NE(svg.find("<title>#1 200: 80 ms</title>"), std::string::npos) << svg;
  EXPECT_LT(svg.find("#1 200: 80 ms"), svg.find("#0 200: 120 ms"));  // sorted ascending
  EXPECT_LT(svg.find("#0 200: 120 ms"), svg.find("#2 failed: 300 ms"));
  EXPECT_NE(svg.find("fill=\"#e15759\"><title>#2 failed"), std::string::npos);
  EXPECT_NE(svg.find(">p50 120 ms</text>"), std::string::npos);
  EXPECT_NE(svg.find(">p90, p99 300 ms</text>"), std::string::npos) << svg;  // one value, one label
  EXPECT_NE(svg.find(">3 requests, sorted by latency</text>"), std::string::npos);
  EXPECT_TRUE(SortedLatencyChart({}).starts_with("<svg "));
}

}  // namespace
}  // namespace npuprof::views
