#include "views/html_operator_memory.h"

#include <fmt/format.h>

namespace npuprof::views {

namespace {

std::string Str(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<double> Num(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
}

std::string MbCell(const json& o, const char* key, bool zh) {
  const auto v = Num(o, key);
  return v ? FormatMbValue(*v) + " MB" : std::string(zh ? "无数据" : "unavailable");
}

}  // namespace

std::string OperatorMemoryHtml(const json& e, bool zh) {
  if (!e.is_object()) return "";
  std::string out = Heading(3, zh ? "算子内存 @ 激活峰值" : "Operator memory at the activation peak");
  std::vector<std::pair<std::string, std::string>> kv = {
      {zh ? "状态" : "status", HtmlEscape(Str(e, "status"))},
      {zh ? "峰值 PTA 已分配" : "PTA allocated at the peak", MbCell(e, "peak_allocated_mb", zh)},
      {zh ? "峰值 PTA 预留" : "PTA reserved at the peak", MbCell(e, "peak_reserved_mb", zh)},
      {zh ? "碎片 (预留 − 已分配)" : "fragmentation (reserved − allocated)", MbCell(e, "fragmentation_mb", zh)}};
  if (const auto w = e.find("window"); w != e.end() && w->is_object())
    kv.emplace_back(zh ? "窗口内最大预留" : "highest reserved in the window", MbCell(*w, "max_reserved_mb", zh));
  if (const auto p = e.find("peak_evidence"); p != e.end() && p->is_object() && p->contains("row"))
    kv.emplace_back(zh ? "峰值证据" : "peak evidence",
                    HtmlEscape(fmt::format("memory_record.csv row {}", (*p)["row"].dump())));
  out += KeyValues(kv);
  if (const auto probs = e.find("problems"); probs != e.end() && probs->is_array())
    for (const auto& t : *probs)
      if (t.is_string()) out += "<p class=\"note\">" + HtmlEscape(t.get<std::string>()) + "</p>\n";
  const auto ops = e.find("peak_operators");
  if (ops == e.end() || !ops->is_array() || ops->empty()) return out;
  HtmlTable table({zh ? "算子" : "operator", "MB", zh ? "分配 (us)" : "allocated (us)",
                   zh ? "释放 (us)" : "released (us)", zh ? "证据" : "evidence"},
                  {false, true, true, true, false}, "operators");
  for (const auto& op : *ops) {
    if (!op.is_object()) continue;
    const auto size = Num(op, "size_mb");
    const auto at = Num(op, "allocated_at_us");
    const auto rel = Num(op, "released_at_us");
    const auto ev = op.find("evidence");
    const std::string row = ev != op.end() && ev->is_object() && ev->contains("row") ? (*ev)["row"].dump() : "?";
    table.Row({"<code>" + HtmlEscape(Str(op, "name")) + "</code>", size ? FormatMbValue(*size) : "-",
               at ? fmt::format("{:.3f}", *at) : "-",
               rel ? fmt::format("{:.3f}", *rel) : HtmlEscape(zh ? "窗口内未释放" : "not released in the window"),
               HtmlEscape("operator_memory.csv row " + row)});
  }
  return out + table.Finish();
}

std::optional<TimePhase> OperatorPeakMarker(const json& e, double origin_us, bool zh) {
  if (!e.is_object()) return std::nullopt;
  const auto at = Num(e, "peak_at_us");
  if (!at) return std::nullopt;
  std::string label = zh ? "算子峰值" : "operator peak";
  if (const auto ops = e.find("peak_operators"); ops != e.end() && ops->is_array() && !ops->empty() &&
                                                 (*ops)[0].is_object()) {
    const auto size = Num((*ops)[0], "size_mb");
    label += fmt::format(": {} {} MB", Str((*ops)[0], "name"), size ? FormatMbValue(*size) : "?");
  }
  return TimePhase{"operator_peak", label, (*at - origin_us) / 1e6, std::nullopt};
}

}  // namespace npuprof::views
