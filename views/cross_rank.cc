#include "views/cross_rank.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "common/text.h"
#include "common/utf8.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

constexpr Label kTitle{"跨 rank 对比", "cross-rank view"};
constexpr Label kMedian{"设备时间中位数", "median device time"};
constexpr Label kSlowest{"最慢 rank", "slowest rank"};
constexpr Label kNoSummary{"无算子汇总", "no kernel summary"};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

std::optional<double> Median(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string Num(const json& v, const char* fmt_spec) {
  return v.is_number() ? fmt::format(fmt::runtime(fmt_spec), v.get<double>()) : "-";
}

}  // namespace

bool IsCommunicationType(const std::string& type, const std::string& core) {
  const std::string t = Lower(type);
  return Lower(core) == "hccl" || t.rfind("hcom", 0) == 0 || t.rfind("hccl", 0) == 0;
}

json CrossRankView(const json& m) {
  const std::string run_machine = StrField(m, "machine");
  json ranks = json::array();
  std::vector<double> times;
  for (const auto& d : ArrField(m, "remote_profile_dirs")) {
    const std::string path = StrField(d, "path");
    json r = {{"machine", Field(d, "machine").is_string() ? Field(d, "machine") : json(run_machine)},
              {"device_id", Field(d, "device_id").is_number_integer() ? Field(d, "device_id") : json(nullptr)},
              {"rank_dir", PathBaseName(path)},
              {"path", path},
              {"analysis_status", Field(d, "analysis_status")},
              {"device_time_us", nullptr},
              {"comm_us", nullptr},
              {"comm_share_pct", nullptr},
              {"top_kernel", nullptr},
              {"deviation_from_median_pct", nullptr},
              {"deviation_from_median_us", nullptr}};
    const json& ks = Field(d, "kernel_summary");
    const auto total = NumField(ks, "total_us");
    if (!ks.is_object() || ks.contains("error") || !total) {
      r["note"] = ks.is_object() && ks.contains("error")
                      ? "kernel summary failed: " + TruncateUtf8(CellText(Field(ks, "error")), 300)
                      : std::string("no kernel summary (kernel_details.csv missing or invalid)");
      ranks.push_back(std::move(r));
      continue;
    }
    double comm = 0;
    for (const auto& t : ArrField(ks, "by_type"))
      if (IsCommunicationType(StrField(t, "type"), StrField(t, "core"))) comm += NumField(t, "total_us").value_or(0);
    r["device_time_us"] = R3(*total);
    r["comm_us"] = R3(comm);
    r["comm_share_pct"] = *total > 0 ? json(R3(comm / *total * 100.0)) : json(nullptr);
    const auto& top = ArrField(ks, "top");
    if (!top.empty())
      r["top_kernel"] = {{"name", Field(top[0], "name")},
                         {"type", Field(top[0], "type")},
                         {"total_us", Field(top[0], "total_us")},
                         {"share_pct", Field(top[0], "share_pct")}};
    times.push_back(*total);
    ranks.push_back(std::move(r));
  }
  const std::optional<double> median = Median(times);
  json slowest = nullptr;
  double slowest_us = -1;
  for (auto& r : ranks) {
    if (!r["device_time_us"].is_number()) continue;
    const double t = r["device_time_us"].get<double>();
    if (median) {
      r["deviation_from_median_us"] = R3(t - *median);
      if (*median > 0) r["deviation_from_median_pct"] = R3((t - *median) / *median * 100.0);
    }
    if (t > slowest_us) {
      slowest_us = t;
      slowest = {{"machine", r["machine"]},
                 {"device_id", r["device_id"]},
                 {"rank_dir", r["rank_dir"]},
                 {"device_time_us", r["device_time_us"]},
                 {"deviation_from_median_pct", r["deviation_from_median_pct"]}};
    }
  }
  return {{"ranks", std::move(ranks)},
          {"ranks_with_summary", times.size()},
          {"median_device_time_us", median ? json(R3(*median)) : json(nullptr)},
          {"slowest", std::move(slowest)}};
}

std::string RenderCrossRankText(const json& v, const std::string& lang) {
  const Words w(IsZh(lang));
  std::string out = fmt::format("  {}:\n", w(kTitle));
  out += fmt::format("    {:<14} {:>6} {:<44} {:>14} {:>7} {:>9}  {}\n", "machine", "device", "rank_dir",
                     "device us", "comm %", "vs med %", "top kernel");
  const json slowest = Field(v, "slowest");
  for (const auto& r : ArrField(v, "ranks")) {
    const bool is_slowest = slowest.is_object() && Field(slowest, "rank_dir") == Field(r, "rank_dir") &&
                            Field(slowest, "machine") == Field(r, "machine");
    std::string top = "-";
    if (Field(r, "top_kernel").is_object()) top = TruncateUtf8(StrField(Field(r, "top_kernel"), "name"), 60);
    else if (Field(r, "note").is_string()) top = w(kNoSummary);
    out += fmt::format("    {:<14} {:>6} {:<44} {:>14} {:>7} {:>9}  {}{}\n",
                       TruncateUtf8(StrField(r, "machine"), 14), CellText(Field(r, "device_id")),
                       TruncateUtf8(StrField(r, "rank_dir"), 44), Num(Field(r, "device_time_us"), "{:.1f}"),
                       Num(Field(r, "comm_share_pct"), "{:.1f}"), Num(Field(r, "deviation_from_median_pct"), "{:+.1f}"),
                       top, is_slowest ? "  <- " + std::string(w(kSlowest)) : "");
  }
  out += fmt::format("    {}: {} µs\n", w(kMedian), Num(Field(v, "median_device_time_us"), "{:.1f}"));
  if (slowest.is_object())
    out += fmt::format("    {}: {} device {} {} ({} µs, {}% vs median)\n", w(kSlowest), StrField(slowest, "machine"),
                       CellText(Field(slowest, "device_id")), StrField(slowest, "rank_dir"),
                       Num(Field(slowest, "device_time_us"), "{:.1f}"),
                       Num(Field(slowest, "deviation_from_median_pct"), "{:+.1f}"));
  return out;
}

}  // namespace npuprof::views
