#include "views/html_run_compare.h"

#include <cmath>

#include <fmt/format.h>

#include "common/utf8.h"
#include "views/charts.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

using nlohmann::json;

constexpr Label kMemTitle{"HBM 显存对比", "HBM memory compare"};
constexpr Label kTorchTitle{"Torch Profiler 采集对比", "Torch profiler collection compare"};
constexpr Label kRuns{"运行", "Runs"};
constexpr Label kRun{"运行", "Run"};
constexpr Label kStatus{"状态", "Status"};
constexpr Label kReference{"基准", "reference"};
constexpr Label kConfig{"配置差异", "Configuration differences"};
constexpr Label kNoDiff{"所有配置字段相同。", "Every configuration field is the same."};
constexpr Label kField{"字段", "Field"};
constexpr Label kPosition{"位置", "Position"};
constexpr Label kDeviceIds{"设备", "devices"};
constexpr Label kComponent{"组件", "Component"};
constexpr Label kEvidence{"证据", "Evidence"};
constexpr Label kTokens{"KV Cache tokens", "KV cache tokens"};
constexpr Label kUsed{"已用 HBM", "HBM used"};
constexpr Label kTotal{"总 HBM", "HBM total"};
constexpr Label kTotals{"合计 (各设备之和)", "Totals (sum over devices)"};
constexpr Label kKernelType{"Kernel 类型", "Kernel Type"};
constexpr Label kKernelName{"Kernel", "Kernel"};
constexpr Label kKernelTotal{"全部 kernel", "all kernels"};
constexpr Label kKernelsByType{"Kernel 设备时间 (按类型)", "Kernel device time by Type"};
constexpr Label kMovers{"变化最大的 kernel (按 |Δ|)", "Kernels that moved most (by |Δ|)"};
constexpr Label kNoKernels{"无 kernel 汇总 (kernel_details.csv 缺失或不可读)",
                           "No kernel summary (kernel_details.csv missing or unreadable)"};
constexpr Label kDeviceCounts{"设备数", "Device count"};
constexpr Label kIncomplete{"缺少部分设备的值", "missing on some devices"};
constexpr Label kNotes{"说明", "Notes"};
constexpr Label kBenchmark{"负载结果", "Benchmark results"};
constexpr Label kGates{"门禁", "Gates"};
constexpr Label kRanks{"各 rank 输出", "Outputs per rank"};
constexpr Label kMetric{"指标", "Metric"};
constexpr Label kDiffers{"不同", "differs"};
constexpr Label kSame{"相同", "same"};

std::string E(std::string_view s) { return HtmlEscape(s); }

std::string Letter(size_t i) { return i < 26 ? std::string(1, static_cast<char>('A' + i)) : fmt::format("R{}", i); }

std::string Mb(const json& v) { return v.is_number() ? FormatMbValue(v.get<double>()) : "-"; }
std::string SignedMb(const json& v) {
  if (!v.is_number()) return "-";
  const double d = v.get<double>();
  return (d > 0 ? "+" : d < 0 ? "&#8722;" : "") + FormatMbValue(d < 0 ? -d : d);
}
// Counts (tokens, bytes) stay whole numbers even when a delta was computed
// in floating point.
bool Whole(const json& v) {
  if (v.is_number_integer()) return true;
  const double d = v.get<double>();
  return std::isfinite(d) && std::fabs(d) < 1e15 && std::floor(d) == d;
}
std::string Plain(const json& v) {
  if (!v.is_number()) return "-";
  if (Whole(v)) return std::to_string(static_cast<int64_t>(v.get<double>()));
  return fmt::format("{:.3f}", v.get<double>());
}
std::string SignedPlain(const json& v) {
  if (!v.is_number()) return "-";
  if (Whole(v)) return fmt::format("{:+}", static_cast<int64_t>(v.get<double>()));
  return fmt::format("{:+.3f}", v.get<double>());
}
std::string Pct(const json& v) { return v.is_number() ? fmt::format("{:+.2f}%", v.get<double>()) : "-"; }

size_t RunCount(const json& c) { return ArrField(c, "runs").size(); }

// Header: label, one column per run, Δ and Δ% per later run [, evidence].
std::pair<std::vector<std::string>, std::vector<bool>> Columns(const std::string& first, size_t n, const char* unit,
                                                               const std::string& last) {
  std::vector<std::string> h = {first};
  std::vector<bool> num = {false};
  for (size_t i = 0; i < n; ++i) {
    h.push_back(Letter(i) + (unit[0] ? std::string(" (") + unit + ")" : ""));
    num.push_back(true);
  }
  for (size_t i = 1; i < n; ++i) {
    h.push_back("Δ " + Letter(i));
    h.push_back("Δ% " + Letter(i));
    num.push_back(true);
    num.push_back(true);
  }
  if (!last.empty()) {
    h.push_back(last);
    num.push_back(false);
  }
  return {h, num};
}

std::vector<std::string> ValueCells(const std::string& label_html, const json& row, const char* values_key,
                                    const char* delta_key, bool mb) {
  std::vector<std::string> cells = {label_html};
  const json& values = ArrField(row, values_key);
  const json& deltas = ArrField(row, delta_key);
  const json& pcts = ArrField(row, "delta_pct");
  for (const auto& v : values) cells.push_back(mb ? Mb(v) : Plain(v));
  for (size_t i = 1; i < values.size(); ++i) {
    const json& d = i < deltas.size() ? deltas[i] : Field(json(), "");
    const bool moved = d.is_number() && d.get<double>() != 0;
    const std::string text = mb ? SignedMb(d) : E(SignedPlain(d));
    cells.push_back(moved ? "<strong>" + text + "</strong>" : text);
    cells.push_back(i < pcts.size() ? Pct(pcts[i]) : "-");
  }
  return cells;
}

// Per run: file[:line] [blob] of the value's first evidence entries.
std::string EvidenceCell(const json& row) {
  std::string out;
  size_t i = 0;
  for (const auto& ev : ArrField(row, "evidence")) {
    const std::string who = Letter(i++);
    if (!ev.is_array()) continue;
    for (const auto& e : ev) {
      std::string where = StrField(e, "file");
      if (Field(e, "line").is_number()) where += ":" + CellText(Field(e, "line"));
      if (Field(e, "row").is_number()) where += " row " + CellText(Field(e, "row"));
      const std::string blob = StrField(e, "blob");
      out += "<div>" + E(who) + ": " + E(where);
      if (!blob.empty()) out += fmt::format(" <span title=\"sha256:{}\">[{}]</span>", E(blob), E(blob.substr(0, 12)));
      out += "</div>";
    }
  }
  return out.empty() ? "" : "<div class=\"ev\">" + out + "</div>";
}

std::string NotesList(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::string out = "<ul class=\"note\">";
  for (const auto& n : notes) out += "<li>" + E(TruncateUtf8(n, 400)) + "</li>";
  return out + "</ul>\n";
}

void CollectNotes(const json& arr, std::vector<std::string>* out) {
  for (const auto& n : arr)
    if (n.is_string()) out->push_back(n.get<std::string>());
}

std::string Header(const json& c, const Words& w) {
  HtmlTable t({"", w(kRun), w(kStatus), "tag", "tp", "dp", "model"});
  size_t i = 0;
  for (const auto& r : ArrField(c, "runs")) {
    t.Row({"<strong>" + E(Letter(i)) + "</strong>" + (i == 0 ? " <span class=\"sub\">(" + E(w(kReference)) + ")</span>" : ""),
           "<code>" + E(StrField(r, "run_id")) + "</code>", StatusBadge(StrField(r, "status", "-")),
           E(StrField(r, "tag", "-")), E(CellText(Field(r, "tp"))), E(CellText(Field(r, "dp"))),
           E(StrField(r, "model", "-"))});
    ++i;
  }
  std::string out = Heading(2, w(kRuns), "runs") + t.Finish();
  out += Heading(2, w(kConfig), "config");
  if (ArrField(c, "config_diff").empty()) return out + "<p class=\"note\">" + E(w(kNoDiff)) + "</p>\n";
  std::vector<std::string> h = {w(kField)};
  for (size_t k = 0; k < RunCount(c); ++k) h.push_back(Letter(k));
  HtmlTable d(h);
  for (const auto& f : ArrField(c, "config_diff")) {
    std::vector<std::string> cells = {"<code>" + E(StrField(f, "field")) + "</code>"};
    for (const auto& v : ArrField(f, "values")) cells.push_back(E(TruncateUtf8(CellText(v), 300)));
    d.Row(cells);
  }
  return out + d.Finish();
}

std::string Memory(const json& c, const Words& w) {
  const size_t n = RunCount(c);
  const bool zh = w.zh();
  std::string out;
  for (const auto& d : ArrField(c, "devices")) {
    std::vector<std::string> ids;
    size_t k = 0;
    const json& machines = Field(d, "machines");  // multi-node runs: machine:device
    for (const auto& id : ArrField(d, "device_ids")) {
      const json m = machines.is_array() && k < machines.size() ? machines[k] : json(nullptr);
      ids.push_back(Letter(k++) + "=" + (m.is_string() ? m.get<std::string>() + ":" : "") + CellText(id));
    }
    out += Heading(2, fmt::format("{} {} ({}: {})", w(kPosition), CellText(Field(d, "position")), w(kDeviceIds),
                                  fmt::join(ids, ", ")),
                   fmt::format("position-{}", CellText(Field(d, "position"))));
    auto [h, num] = Columns(w(kComponent), n, "MB", w(kEvidence));
    HtmlTable t(h, num);
    std::vector<std::string> notes;
    CollectNotes(ArrField(d, "notes"), &notes);
    for (const auto& row : ArrField(d, "components")) {
      const std::string key = StrField(row, "key");
      const std::string swatch =
          fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>", E(ComponentColour(key)));
      auto cells = ValueCells(swatch + E(StrField(row, zh ? "label_zh" : "label_en", key)), row, "values_mb",
                              "delta_mb", true);
      cells.push_back(EvidenceCell(row));
      t.Row(cells, key == "residual" ? "residual" : "");
      CollectNotes(ArrField(row, "notes"), &notes);
    }
    auto tokens = ValueCells(E(w(kTokens)), Field(d, "kv_cache_tokens"), "values", "delta", false);
    json tev = json::object();
    tev["evidence"] = json::array();
    for (const auto& e : ArrField(Field(d, "kv_cache_tokens"), "evidence"))
      tev["evidence"].push_back(e.is_object() ? json::array({e}) : json(nullptr));
    tokens.push_back(EvidenceCell(tev));
    t.Row(tokens);
    for (const auto& [key, label] : {std::pair{"hbm_used_mb", &kUsed}, std::pair{"hbm_total_mb", &kTotal}}) {
      auto cells = ValueCells(E(w(*label)), Field(d, key), "values_mb", "delta_mb", true);
      cells.push_back("");
      t.Row(cells);
    }
    out += t.Finish() + NotesList(notes);
  }
  const json& tot = Field(c, "totals");
  std::vector<std::string> counts;
  size_t k = 0;
  for (const auto& v : ArrField(tot, "device_counts")) counts.push_back(Letter(k++) + "=" + CellText(v));
  out += Heading(2, w(kTotals), "totals");
  out += "<p class=\"sub\">" + E(w(kDeviceCounts)) + ": " + E(fmt::format("{}", fmt::join(counts, ", "))) + "</p>\n";
  auto [h, num] = Columns(w(kComponent), n, "MB", "");
  HtmlTable t(h, num);
  std::vector<std::string> notes;
  auto total = [&](const std::string& label, const json& row) {
    t.Row(ValueCells(E(label), row, "values_mb", "delta_mb", true));
    if (!ArrField(row, "incomplete").empty())
      notes.push_back(fmt::format("{}: {} {}", label, w(kIncomplete), CellText(Field(row, "incomplete"))));
  };
  for (const auto& row : ArrField(tot, "components"))
    total(StrField(row, zh ? "label_zh" : "label_en", StrField(row, "key")), row);
  total(w(kUsed), Field(tot, "hbm_used_mb"));
  total(w(kTotal), Field(tot, "hbm_total_mb"));
  return out + t.Finish() + NotesList(notes);
}

// One rank position's kernel compare: total device time and every Type,
// then the kernels that moved most (views/kernel_compare.h).
std::string KernelTables(const json& k, size_t n, const Words& w) {
  if (!k.is_object()) return "";
  bool any = false;
  for (const auto& s : ArrField(k, "statuses")) any |= s.is_string() && s.get<std::string>() == "ok";
  if (!any) return "<p class=\"sub\">" + E(w(kNoKernels)) + "</p>\n";
  auto [h, num] = Columns(w(kKernelType), n, "µs", "");
  HtmlTable t(h, num, "kernels");
  t.Row(ValueCells("<strong>" + E(w(kKernelTotal)) + "</strong>", Field(k, "total_us"), "values_us", "delta_us", false));
  for (const auto& row : ArrField(k, "by_type"))
    t.Row(ValueCells("<code>" + E(StrField(row, "type")) + "</code>", row, "total_us", "delta_us", false));
  auto [mh, mnum] = Columns(w(kKernelName), n, "µs", "");
  HtmlTable m(mh, mnum, "kernel-movers");
  for (const auto& row : ArrField(k, "top_movers"))
    m.Row(ValueCells("<code>" + E(StrField(row, "name")) + "</code> <span class=\"sub\">" +
                         E(StrField(row, "type")) + "</span>",
                     row, "total_us", "delta_us", false));
  return Heading(4, w(kKernelsByType)) + t.Finish() + Heading(4, w(kMovers)) + m.Finish();
}

std::string Torch(const json& c, const Words& w) {
  const size_t n = RunCount(c);
  auto [h, num] = Columns(w(kMetric), n, "", "");
  HtmlTable b(h, num);
  for (const auto& row : ArrField(c, "benchmark"))
    b.Row(ValueCells("<code>" + E(StrField(row, "key")) + "</code>", row, "values", "delta", false));
  std::string out = Heading(2, w(kBenchmark), "benchmark") + b.Finish();

  std::vector<std::string> gh = {w(kMetric)};
  for (size_t k = 0; k < n; ++k) gh.push_back(Letter(k));
  gh.push_back("");
  HtmlTable g(gh);
  for (const auto& row : ArrField(c, "gates")) {
    std::vector<std::string> cells = {"<code>" + E(StrField(row, "key")) + "</code>"};
    for (const auto& v : ArrField(row, "values"))
      cells.push_back(v.is_string() ? StatusBadge(v.get<std::string>()) : E(CellText(v)));
    const bool same = Field(row, "same").is_boolean() && Field(row, "same").get<bool>();
    cells.push_back(Badge(same ? w(kSame) : w(kDiffers), same));
    g.Row(cells);
  }
  out += Heading(2, w(kGates), "gates") + g.Finish();

  out += Heading(2, w(kRanks), "ranks");
  for (const auto& r : ArrField(c, "ranks")) {
    const bool placed = Field(r, "node").is_number() && Field(r, "rank_in_node").is_number();
    out += Heading(3, fmt::format("{} {}{}", w(kPosition), CellText(Field(r, "position")),
                                  placed ? fmt::format(" (node {} rank {})", CellText(Field(r, "node")),
                                                       CellText(Field(r, "rank_in_node")))
                                         : std::string()));
    for (const auto& note : ArrField(r, "notes"))
      if (note.is_string()) out += "<p class=\"sub\">" + E(note.get<std::string>()) + "</p>\n";
    std::string paths = "<ul class=\"sub\">";
    size_t k = 0;
    const json& st = ArrField(r, "analysis_statuses");
    for (const auto& p : ArrField(r, "paths")) {
      paths += "<li>" + E(Letter(k)) + ": <code>" + E(CellText(p)) + "</code> " +
               (k < st.size() && st[k].is_string() ? StatusBadge(st[k].get<std::string>()) : "-") + "</li>";
      ++k;
    }
    out += paths + "</ul>\n";
    auto [rh, rnum] = Columns("bytes", n, "", "");
    HtmlTable t(rh, rnum);
    for (const auto& o : ArrField(r, "outputs"))
      t.Row(ValueCells("<code>" + E(StrField(o, "key")) + "</code>", o, "size_bytes", "delta", false));
    out += t.Finish();
    out += KernelTables(Field(r, "kernels"), n, w);
  }
  return out;
}

std::string Render(const json& c, bool zh) {
  const Words w(zh);
  const bool memory = StrField(c, "kind") == "memory-profile";
  const std::string title = w(memory ? kMemTitle : kTorchTitle);
  std::string body = Heading(1, title);
  body += Header(c, w);
  body += memory ? Memory(c, w) : Torch(c, w);
  std::vector<std::string> notes;
  CollectNotes(ArrField(c, "notes"), &notes);
  if (!notes.empty()) body += Heading(2, w(kNotes), "notes") + NotesList(notes);
  return HtmlDocument(fmt::format("{} — {}", title, StrField(c, "reference_run")), zh ? "zh" : "en", body);
}

}  // namespace

Result<std::string> RenderRunCompareHtml(const json& compare, const std::string& lang) {
  if (!compare.is_object() || !Field(compare, "runs").is_array())
    return Status::Invalid("compare page: expected the JSON object `npuprof compare --format json` prints "
                           "(no \"runs\" array)");
  try {
    return Render(compare, IsZh(lang));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("compare page: rendering failed: ") + e.what());
  }
}

}  // namespace npuprof::views
