#include "views/hbm_watch_text.h"

#include <fmt/format.h>

namespace npuprof::views {

using nlohmann::json;

Result<json> BuildHbmWatchReport(const json& m) {
  const std::string run = m.value("run_id", "");
  if (!m.contains("hbm_watch") || !m["hbm_watch"].is_object())
    return Status::Invalid(fmt::format(
        "run {} (serve) has no report: it took no HBM samples (submit it with --watch-hbm SECONDS)", run));
  return json{{"run_id", run},
              {"status", m.value("status", "")},
              {"state", m.value("state", "")},
              {"hbm_watch", m["hbm_watch"]}};
}

namespace {

double Num(const json& j, const char* k) { return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0; }
int64_t Int(const json& j, const char* k) {
  return j.contains(k) && j[k].is_number_integer() ? j[k].get<int64_t>() : 0;
}
std::string Str(const json& j, const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; }

}  // namespace

std::string RenderHbmWatchText(const json& report, const std::string& lang) {
  const bool en = lang == "en";
  const json& w = report.contains("hbm_watch") ? report["hbm_watch"] : json::object();
  std::string out = fmt::format("{} {} ({}{})\n", en ? "HBM watch of run" : "HBM 监测, 运行", Str(report, "run_id"),
                                Str(report, "state"), Str(report, "status").empty() ? "" : ", " + Str(report, "status"));
  out += fmt::format("{}: {:g} s, {}: {}, {}: {:.3f} % {}, {}: +{:.1f} MB/h, {}: {}\n",
                     en ? "interval" : "采样间隔", Num(w, "interval_s"), en ? "samples" : "样本数", Int(w, "samples"),
                     en ? "confidence" : "置信度", 100 * Num(w, "confidence"), en ? "(one-sided)" : "(单侧)",
                     en ? "threshold" : "阈值", Num(w, "threshold_mb_per_h"), en ? "verdict" : "结论",
                     Str(w, "verdict"));
  if (!w.contains("devices") || !w["devices"].is_array()) return out;
  for (const json& d : w["devices"]) {
    if (!d.is_object()) continue;
    out += fmt::format("  {} {}: {}  ({} {:.1f} MB/h, [{:.1f}, {:.1f}], {} {}", en ? "device" : "设备",
                       Int(d, "device_id"), Str(d, "text"), en ? "slope" : "斜率", Num(d, "slope_mb_per_h"),
                       Num(d, "lower_mb_per_h"), Num(d, "upper_mb_per_h"), Int(d, "samples"),
                       en ? "samples" : "个样本");
    if (d.contains("first_growing_sample") && d["first_growing_sample"].is_number_integer())
      out += fmt::format(", {} {}", en ? "first flagged at sample" : "首次判定增长于样本", Int(d, "first_growing_sample"));
    out += fmt::format("; {} {} -> {} / {} MB)\n", en ? "used" : "已用", Int(d, "first_used_mb"),
                       Int(d, "last_used_mb"), Int(d, "total_mb"));
  }
  return out;
}

}  // namespace npuprof::views
