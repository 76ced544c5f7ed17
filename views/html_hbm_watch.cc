#include "views/html_hbm_watch.h"

#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "views/charts.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

constexpr Label kTitle{"HBM 漂移监测", "HBM drift watch"};
constexpr Label kRun{"运行", "Run"};
constexpr Label kStatus{"状态", "Status"};
constexpr Label kState{"阶段", "State"};
constexpr Label kInterval{"采样间隔", "Interval"};
constexpr Label kSamples{"样本数", "Samples"};
constexpr Label kConfidence{"置信度 (单侧)", "Confidence (one-sided)"};
constexpr Label kThreshold{"增长阈值", "Growth threshold"};
constexpr Label kVerdict{"结论", "Verdict"};
constexpr Label kRequests{"已应答请求", "Requests answered"};
constexpr Label kDevice{"Device", "Device"};
constexpr Label kSeries{"HBM 采样 (最近保留的样本) 与拟合直线", "HBM samples (the last ones kept) and the fitted line"};
constexpr Label kSampled{"npu-smi 采样", "npu-smi samples"};
constexpr Label kFit{"拟合", "fit"};
constexpr Label kTime{"时间", "time"};
constexpr Label kNoSamples{"尚无样本。", "No samples yet."};
constexpr Label kFigure{"指标", "Figure"};
constexpr Label kValue{"值", "Value"};
constexpr Label kSlope{"斜率 (全部样本的最小二乘)", "Slope (least squares over every sample)"};
constexpr Label kStderr{"标准误", "Standard error"};
constexpr Label kBounds{"置信区间", "Confidence bounds"};
constexpr Label kFirstFlagged{"首次判定增长于样本", "First flagged growing at sample"};
constexpr Label kNever{"从未", "never"};
constexpr Label kUsedFirstLast{"已用: 首个 → 最近 / 总量", "Used: first → last / total"};
constexpr Label kPerRequest{"每请求增长", "Growth per request"};
constexpr Label kTested{"在 {} 单侧置信度下检验: 下界 {} MB/h, 上界 {} MB/h",
                        "tested at {} one-sided confidence: lower bound {} MB/h, upper {} MB/h"};

std::string E(std::string_view s) { return HtmlEscape(s); }

double Num(const json& j, const char* k) {
  const json& v = Field(j, k);
  return v.is_number() ? v.get<double>() : 0.0;
}

std::optional<double> OptNum(const json& j, const char* k) {
  const json& v = Field(j, k);
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}

std::string Fixed1(double v) { return fmt::format("{:.1f}", v); }

std::string Percent(double confidence) { return fmt::format("{:.3f} %", 100 * confidence); }

// Device `dev`'s readings in the kept samples: (t_ms, used_mb).
std::vector<std::pair<double, double>> Readings(const json& recent, const json& dev) {
  std::vector<std::pair<double, double>> out;
  for (const json& s : recent) {
    const json& t = Field(s, "t_ms");
    if (!t.is_number()) continue;
    for (const json& d : ArrField(s, "devices"))
      if (Field(d, "device_id") == dev && Field(d, "used_mb").is_number())
        out.emplace_back(t.get<double>(), Field(d, "used_mb").get<double>());
  }
  return out;
}

std::string DeviceChart(const json& watch, const json& d, const Words& w) {
  const auto readings = Readings(ArrField(watch, "recent"), Field(d, "device_id"));
  if (readings.empty()) return "<p class=\"note\">" + E(w(kNoSamples)) + "</p>\n";
  const double origin = readings.front().first;
  TimeChartInput in;
  in.x_label = w(kTime);
  in.y_label = "HBM";
  TimeLine samples;
  samples.label = w(kSampled);
  samples.colour = "#1f77b4";
  for (const auto& [t, mb] : readings) samples.points.push_back({(t - origin) / 1000, mb});
  in.lines.push_back(std::move(samples));
  // The fitted line over every sample, across the kept samples' span.
  const std::optional<double> fit0 = OptNum(d, "fit_first_used_mb");
  const std::optional<double> first_t = OptNum(watch, "first_t_ms");
  if (fit0 && first_t) {
    const double slope = Num(d, "slope_mb_per_h");
    const auto at = [&](double t_ms) { return TimePoint{(t_ms - origin) / 1000, *fit0 + slope * (t_ms - *first_t) / 3.6e6}; };
    TimeLine fit;
    fit.label = fmt::format("{}: {} MB/h", w(kFit), (slope >= 0 ? "+" : "") + Fixed1(slope));
    fit.colour = "#d62728";
    fit.points = {at(readings.front().first), at(readings.back().first)};
    in.lines.push_back(std::move(fit));
  }
  return Heading(3, w(kSeries)) + "<div class=\"chart\">" + HbmTimeChart(in) + "</div>\n";
}

std::string DeviceFigures(const json& watch, const json& d, const Words& w) {
  HtmlTable t({w(kFigure), w(kValue)}, {false, true});
  t.Row({E(w(kSlope)), E(Fixed1(Num(d, "slope_mb_per_h")) + " MB/h")});
  t.Row({E(w(kStderr)), E(Fixed1(Num(d, "stderr_mb_per_h")) + " MB/h")});
  t.Row({E(w(kBounds)) + " (" + E(Percent(Num(watch, "confidence"))) + ")",
         E(fmt::format("[{}, {}] MB/h", Fixed1(Num(d, "lower_mb_per_h")), Fixed1(Num(d, "upper_mb_per_h"))))});
  t.Row({E(w(kSamples)), E(CellText(Field(d, "samples")))});
  const json& flagged = Field(d, "first_growing_sample");
  t.Row({E(w(kFirstFlagged)), E(flagged.is_number() ? CellText(flagged) : std::string(w(kNever)))});
  t.Row({E(w(kUsedFirstLast)), E(fmt::format("{} → {} / {} MB", FormatMbValue(Num(d, "first_used_mb")),
                                             FormatMbValue(Num(d, "last_used_mb")),
                                             FormatMbValue(Num(d, "total_mb"))))});
  const json& pr = Field(d, "per_request");
  if (pr.is_object())
    t.Row({E(w(kPerRequest)), E(fmt::format("{:.2f} MB ([{:.2f}, {:.2f}])", Num(pr, "mb_per_request"),
                                            Num(pr, "lower"), Num(pr, "upper")))});
  return t.Finish();
}

std::string DeviceCard(const json& watch, const json& d, const Words& w) {
  const std::string dev = CellText(Field(d, "device_id"));
  const std::string verdict = StrField(d, "verdict");
  const std::string text = StrField(d, "text", verdict);
  std::string out = "<section class=\"card\">";
  out += Heading(2, fmt::format("{} {}", w(kDevice), dev), "device-" + dev);
  out += "<p class=\"verdict\">" + Badge(text, verdict != "growing") + " " +
         E(fmt::format(fmt::runtime(w(kTested)), Percent(Num(watch, "confidence")), Fixed1(Num(d, "lower_mb_per_h")),
                       Fixed1(Num(d, "upper_mb_per_h")))) +
         "</p>\n";
  out += DeviceChart(watch, d, w);
  out += DeviceFigures(watch, d, w);
  return out + "</section>\n";
}

}  // namespace

Result<std::string> RenderHbmWatchHtml(const json& report, const std::string& lang) {
  const json& watch = Field(report, "hbm_watch");
  if (!watch.is_object())
    return Status::Invalid(fmt::format("run {} has no HBM watch to render (submit serve with --watch-hbm SECONDS)",
                                       StrField(report, "run_id")));
  const bool zh = IsZh(lang);
  const Words w(zh);
  const std::string run_id = StrField(report, "run_id");
  const std::string verdict = StrField(watch, "verdict", "steady");
  std::string body = Heading(1, w(kTitle));
  std::vector<std::pair<std::string, std::string>> head;
  if (!run_id.empty()) head.emplace_back(w(kRun), "<code>" + E(run_id) + "</code>");
  head.emplace_back(w(kStatus), StatusBadge(StrField(report, "status")));
  head.emplace_back(w(kState), E(StrField(report, "state", "-")));
  head.emplace_back(w(kInterval), E(fmt::format("{:g} s", Num(watch, "interval_s"))));
  head.emplace_back(w(kSamples), E(CellText(Field(watch, "samples"))));
  if (Num(watch, "requests") > 0) head.emplace_back(w(kRequests), E(CellText(Field(watch, "requests"))));
  head.emplace_back(w(kConfidence), E(Percent(Num(watch, "confidence"))));
  head.emplace_back(w(kThreshold), E("+" + Fixed1(Num(watch, "threshold_mb_per_h")) + " MB/h"));
  head.emplace_back(w(kVerdict), Badge(verdict, verdict != "growing"));
  body += "<section class=\"card\">" + KeyValues(head) + "</section>\n";
  for (const json& d : ArrField(watch, "devices"))
    if (d.is_object()) body += DeviceCard(watch, d, w);
  const std::string title = run_id.empty() ? std::string(w(kTitle)) : fmt::format("{} — {}", w(kTitle), run_id);
  return HtmlDocument(title, zh ? "zh" : "en", body);
}

}  // namespace npuprof::views
