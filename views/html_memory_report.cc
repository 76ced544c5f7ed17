#include "views/html_memory_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/utf8.h"
#include "views/charts.h"

namespace npuprof::views {

namespace {

// The labels of the page; the zh words are those of the text report.
struct MemWords {
  const char* title;
  const char* run;
  const char* status;
  const char* overview;
  const char* device;
  const char* total;
  const char* used;
  const char* component;
  const char* mb;
  const char* gib;
  const char* share;
  const char* source;
  const char* evidence;
  const char* xv;
  const char* npu_used;
  const char* comp_sum;
  const char* unattributed;
  const char* scope;
  const char* weights_table;
  const char* category;
  const char* per_device;
  const char* dtypes;
  const char* chain;
  const char* notes;
  const char* unavailable;
  const char* free;
  const char* hbm_over_time;
  const char* no_series;
  const char* time;
  const char* what;
  const char* file;
  const char* tensors;
  const char* phase_baseline;
  const char* phase_launch;
  const char* phase_ready;
  const char* phase_inference;
  const char* phase_stop;
  const char* peak_from_series;
};

const MemWords kZh = {
    "HBM 显存拆分报告", "运行", "状态", "各卡 HBM 组成", "Device", "总 HBM", "已用", "组件", "占用 (MB)",
    "占用 (GiB)", "占比", "主数据源", "证据", "交叉验证", "npu-smi 已用", "组件加总", "未归因", "msprof 范围",
    "权重分解 (safetensors 文件头; 分类与分片为基于规则的推断)", "类别", "每卡 GiB", "数据类型", "证据链", "说明",
    "不可用", "空闲", "HBM 随时间变化 (msprof npu_mem)", "本设备没有 msprof npu_mem 时间序列。", "时间", "内容",
    "文件", "张量数", "基线", "启动", "就绪", "推理窗口", "停止", "激活峰值 (时间序列)"};
const MemWords kEn = {
    "HBM memory report", "Run", "Status", "HBM per device", "Device", "Total HBM", "Used", "Component", "MB", "GiB",
    "Share", "Source", "Evidence", "Cross-validation", "npu-smi used", "Component sum", "Unattributed",
    "msprof scope",
    "Weight breakdown (safetensors headers; categories and sharding are rule-based inference)", "Category",
    "GiB/device", "dtypes", "Evidence chain", "Notes", "unavailable", "free", "HBM over time (msprof npu_mem)",
    "No msprof npu_mem series for this device.", "time", "What", "File", "Tensors", "baseline", "launch", "ready",
    "inference", "stop", "activation peak (series)"};

std::string SourceText(const std::string& key, bool zh) {
  struct Pair {
    const char* key;
    const char* zh;
    const char* en;
  };
  static const Pair kSources[] = {
      {"npu_smi_baseline", "npu-smi Phase 0 (baseline)", "npu-smi phase 0 (baseline)"},
      {"baseline_run", "基线取自先前运行", "baseline from an earlier run"},
      {"baseline_file", "基线取自 npu-smi 文件", "baseline from a saved npu-smi file"},
      {"vllm_log", "vLLM 日志", "vLLM log"},
      {"safetensors", "safetensors 文件头精确计算", "safetensors headers (exact bytes)"},
      {"msprof_npu_module_mem", "msprof npu_module_mem", "msprof npu_module_mem"},
      {"npu_smi_delta", "npu-smi delta", "npu-smi delta"},
      {"residual", "残差", "residual"},
      {"config_theory", "config.json 理论值 (仅参考)", "config.json theory (reference only)"},
      {"unavailable", "不可用", "unavailable"},
  };
  for (const auto& p : kSources)
    if (key == p.key) return zh ? p.zh : p.en;
  return key;
}

std::string E(std::string_view s) { return HtmlEscape(s); }

std::string MbCell(const json& v) { return v.is_number() ? FormatMbValue(v.get<double>()) : "-"; }

std::string PctCell(const json& v) { return v.is_number() ? fmt::format("{:.1f}%", v.get<double>()) : "-"; }

std::string SignedPct(const json& v) { return v.is_number() ? fmt::format("{:+.2f}%", v.get<double>()) : "-"; }

std::string Short(const std::string& blob) { return blob.substr(0, 12); }

// One evidence entry: file[:line] [row N] [blob] "text".
std::string EvidenceLine(const json& e) {
  std::string where = StrField(e, "file");
  if (Field(e, "line").is_number()) where += ":" + CellText(Field(e, "line"));
  if (Field(e, "row").is_number()) where += " row " + CellText(Field(e, "row"));
  std::string out = E(where);
  const std::string blob = StrField(e, "blob");
  if (!blob.empty()) out += fmt::format(" <span title=\"sha256:{}\">[{}]</span>", E(blob), E(Short(blob)));
  if (Field(e, "text").is_string()) out += " &#8220;" + E(TruncateUtf8(StrField(e, "text"), 240)) + "&#8221;";
  else if (Field(e, "raw").is_string()) out += " raw=" + E(TruncateUtf8(StrField(e, "raw"), 80));
  return "<div>&#8592; " + out + "</div>";
}

std::string EvidenceCell(const json& c, bool zh) {
  std::string out;
  for (const auto& e : ArrField(c, "evidence")) out += EvidenceLine(e);
  for (const auto& cor : ArrField(c, "corroboration"))
    out += fmt::format("<div>~ {} {} MB ({})</div>", E(SourceText(StrField(cor, "source"), zh)),
                       MbCell(Field(cor, "value_mb")), SignedPct(Field(cor, "diff_pct")));
  if (Field(c, "note").is_string()) out += "<div class=\"note\">" + E(StrField(c, "note")) + "</div>";
  return out.empty() ? "" : "<div class=\"ev\">" + out + "</div>";
}

std::string GibText(const json& mb) {
  return mb.is_number() ? fmt::format("{:.2f} GiB", mb.get<double>() / 1024.0) : "-";
}

std::string ComponentTable(const json& dev, const MemWords& w, bool zh) {
  HtmlTable t({w.component, w.mb, w.gib, w.share, w.source, w.evidence}, {false, true, true, true, false, false});
  for (const auto& c : ArrField(dev, "components")) {
    const std::string key = StrField(c, "key");
    const std::string label = StrField(c, zh ? "label_zh" : "label_en", key);
    const json& v = Field(c, "value_mb");
    std::string src = E(SourceText(StrField(c, "source"), zh));
    const std::string status = StrField(c, "status");
    if (status == "unavailable" || status == "not_reported")
      src += " <span class=\"sub\">(" + E(zh ? std::string("无数据") : status) + ")</span>";
    const std::string swatch = fmt::format("<span class=\"swatch\" style=\"background:{}\"></span>",
                                           E(ComponentColour(key)));
    t.Row({swatch + E(label), MbCell(v), v.is_number() ? fmt::format("{:.3f}", v.get<double>() / 1024.0) : "-",
           PctCell(Field(c, "percent")), src, EvidenceCell(c, zh)},
          key == "residual" ? "residual" : "");
  }
  return t.Finish();
}

std::string CrossValidation(const json& dev, const MemWords& w, bool zh) {
  const json& xv = Field(dev, "cross_validation");
  std::vector<std::pair<std::string, std::string>> kv = {
      {w.npu_used, MbCell(Field(xv, "npu_smi_used_mb")) + " MB"},
      {w.comp_sum, MbCell(Field(xv, "component_sum_mb")) + " MB"},
      {w.unattributed, MbCell(Field(xv, "unattributed_mb")) + " MB" +
                           (Field(xv, "unattributed_pct").is_number()
                                ? " (" + PctCell(Field(xv, "unattributed_pct")) + ")"
                                : "")}};
  if (Field(xv, "msprof_app_mb").is_number()) {
    std::string app = MbCell(Field(xv, "msprof_app_mb")) + " MB";
    const json& ev = Field(xv, "msprof_app_evidence");
    if (ev.is_object()) app += " " + EvidenceLine(ev);
    kv.emplace_back("msprof APP", app);
  }
  if (Field(xv, "weights_plus_kv_mb").is_number()) {
    kv.emplace_back(zh ? "权重 + KV" : "weights + KV", MbCell(Field(xv, "weights_plus_kv_mb")) + " MB");
    kv.emplace_back("APP - (weights+KV)", MbCell(Field(xv, "app_minus_weights_kv_mb")) + " MB");
  }
  if (Field(xv, "weights_vs_safetensors_pct").is_number())
    kv.emplace_back(zh ? "权重 vs safetensors" : "weights vs safetensors",
                    SignedPct(Field(xv, "weights_vs_safetensors_pct")));
  if (Field(xv, "weights_vs_theory_pct").is_number())
    kv.emplace_back(zh ? "权重 vs 理论值" : "weights vs theory", SignedPct(Field(xv, "weights_vs_theory_pct")));
  kv.emplace_back(w.scope, E(StrField(dev, "msprof_scope", "none")));
  return Heading(3, w.xv) + KeyValues(kv);
}

std::string PhaseLabel(const std::string& key, const MemWords& w) {
  if (key == "baseline") return w.phase_baseline;
  if (key == "launch") return w.phase_launch;
  if (key == "ready") return w.phase_ready;
  if (key == "inference") return w.phase_inference;
  if (key == "stop") return w.phase_stop;
  return key;
}

double Origin(const HbmSeriesSet& set) {
  if (set.origin_us) return *set.origin_us;
  double o = INFINITY;
  for (const auto& s : set.series)
    for (const auto& p : s.samples) o = std::min(o, p.t_us);
  for (const auto& p : set.phases) o = std::min(o, p.start_us);
  return std::isfinite(o) ? o : 0;
}

std::string DeviceCurve(int dev, const HbmSeriesSet& set, const MemWords& w) {
  std::string out = Heading(3, w.hbm_over_time);
  const double origin = Origin(set);
  TimeChartInput in;
  in.x_label = w.time;
  in.y_label = "HBM";
  for (const auto& s : set.series) {
    if (s.device_id != dev || s.samples.empty()) continue;
    TimeLine line;
    line.label = fmt::format("{} {} ({})", w.device, dev, s.event.empty() ? "npu_mem" : s.event);
    for (const auto& p : s.samples) line.points.push_back({(p.t_us - origin) / 1e6, p.mb});
    in.lines.push_back(std::move(line));
  }
  if (in.lines.empty()) return out + "<p class=\"note\">" + E(w.no_series) + "</p>\n";
  for (const auto& p : set.phases) {
    TimePhase ph{p.key, PhaseLabel(p.key, w), (p.start_us - origin) / 1e6, std::nullopt};
    if (p.end_us) ph.end_s = (*p.end_us - origin) / 1e6;
    in.phases.push_back(std::move(ph));
  }
  for (const auto& pk : set.peaks) {
    if (pk.device_id != dev) continue;
    in.peak = TimePeak{(pk.t_us - origin) / 1e6, pk.peak_mb, pk.base_mb,
                       fmt::format("{} +{} MB", w.peak_from_series, FormatMbValue(pk.delta_mb))};
  }
  out += "<div class=\"chart\">" + HbmTimeChart(in) + "</div>\n";
  std::string files;
  for (const auto& s : set.series)
    if (s.device_id == dev && !s.samples.empty())
      files += fmt::format("<div>&#8592; {} ({} rows){}</div>", E(s.file), s.samples.size(),
                           s.blob.empty() ? "" : " [" + E(Short(s.blob)) + "]");
  return out + "<div class=\"ev\">" + files + "</div>\n";
}

std::string Overview(const json& devices, const MemWords& w, bool zh) {
  std::vector<DeviceBar> bars;
  for (const auto& d : devices) {
    DeviceBar b;
    b.label = fmt::format("{} {}", w.device, CellText(Field(d, "device_id")));
    b.total_mb = NumField(d, "hbm_total_mb");
    b.used_mb = NumField(d, "hbm_used_mb");
    for (const auto& c : ArrField(d, "components")) {
      auto v = NumField(c, "value_mb");
      if (!v) continue;
      const std::string key = StrField(c, "key");
      b.segments.push_back({key, StrField(c, zh ? "label_zh" : "label_en", key), *v});
    }
    bars.push_back(std::move(b));
  }
  BarChartWords bw{w.free, w.used, w.total};
  return Heading(2, w.overview, "overview") + "<div class=\"chart\">" + StackedHbmBars(bars, bw) + "</div>\n";
}

std::string WeightsBreakdown(const json& wb, const MemWords& w, bool zh) {
  if (!wb.is_object()) return "";
  std::string out = Heading(2, w.weights_table, "weights");
  HtmlTable t({w.category, w.tensors, "GiB", w.per_device, w.share, w.dtypes}, {false, true, true, true, true, false});
  auto f3 = [](const json& v) { return v.is_number() ? fmt::format("{:.3f}", v.get<double>()) : std::string("-"); };
  for (const auto& c : ArrField(wb, "categories")) {
    std::vector<std::string> dt;
    for (const auto& x : ArrField(c, "dtypes")) dt.push_back(CellText(x));
    t.Row({E(StrField(c, "name", StrField(c, "key"))), E(CellText(Field(c, "tensor_count"))),
           f3(Field(c, "total_gib")), f3(Field(c, "per_device_gib")), PctCell(Field(c, "share_pct")),
           E(fmt::format("{}", fmt::join(dt, ", ")))});
  }
  t.Row({E(zh ? "合计" : "total"), "", f3(Field(wb, "total_gib")), f3(Field(wb, "per_device_gib")), "", ""});
  out += t.Finish();
  if (Field(wb, "vllm_per_device_gib").is_number()) {
    out += fmt::format("<p>vLLM {}: {} GiB, {} {:+.3f} GiB ({})</p>\n", E(zh ? "实测每卡" : "per device"),
                       f3(Field(wb, "vllm_per_device_gib")), E(zh ? "差异" : "difference"),
                       NumField(wb, "difference_gib").value_or(0), SignedPct(Field(wb, "difference_pct")));
    std::string reasons;
    for (const auto& r : ArrField(wb, "usual_reasons")) reasons += "<li>" + E(CellText(r)) + "</li>";
    if (!reasons.empty()) out += "<ul class=\"note\">" + reasons + "</ul>\n";
  }
  const std::string blob = StrField(wb, "blob");
  if (!blob.empty())
    out += fmt::format("<div class=\"ev\"><div>&#8592; {} [{}]</div></div>\n", E(StrField(wb, "file")),
                       E(Short(blob)));
  return out;
}

std::string EvidenceChain(const json& report, const MemWords& w) {
  HtmlTable t({w.what, w.file, "sha256"});
  for (const auto& e : ArrField(report, "evidence_chain"))
    t.Row({E(StrField(e, "what")), "<code>" + E(StrField(e, "file")) + "</code>",
           "<code>" + E(StrField(e, "blob")) + "</code>"});
  return Heading(2, w.chain, "evidence") + t.Finish();
}

std::string Notes(const json& report, const MemWords& w) {
  std::string items;
  for (const auto& n : ArrField(report, "notes")) items += "<li>" + E(CellText(n)) + "</li>";
  return items.empty() ? "" : Heading(2, w.notes, "notes") + "<ul>" + items + "</ul>\n";
}

std::string Render(const json& doc, const json& report, const HbmSeriesSet& set, bool zh) {
  const MemWords& w = zh ? kZh : kEn;
  const std::string run_id = StrField(doc, "run_id");
  const std::string status = StrField(doc, "status");
  const json& msprof = Field(report, "msprof");
  std::string body = Heading(1, w.title);
  std::vector<std::pair<std::string, std::string>> head;
  if (!run_id.empty()) head.emplace_back(w.run, "<code>" + E(run_id) + "</code>");
  if (!status.empty()) head.emplace_back(w.status, StatusBadge(status));
  if (Field(doc, "model").is_string()) head.emplace_back("model", "<code>" + E(StrField(doc, "model")) + "</code>");
  head.emplace_back("mode", E(StrField(report, "mode", StrField(doc, "mode"))));
  head.emplace_back("tp / dp", E(CellText(Field(report, "tp"))) + " / " + E(CellText(Field(report, "dp"))));
  head.emplace_back("msprof", E(StrField(msprof, "status", "-")));
  if (Field(doc, "error").is_string()) head.emplace_back("error", E(StrField(doc, "error")));
  body += "<section class=\"card\">" + KeyValues(head) + "</section>\n";

  const json& devices = ArrField(report, "devices");
  body += Overview(devices, w, zh);
  for (const auto& d : devices) {
    const std::string dev = CellText(Field(d, "device_id"));
    body += "<section class=\"card\">";
    body += Heading(2, fmt::format("{} {}", w.device, dev), "device-" + dev);
    body += fmt::format("<p class=\"sub\">{}: {} | {}: {} ({})</p>\n", E(w.total), GibText(Field(d, "hbm_total_mb")),
                        E(w.used), GibText(Field(d, "hbm_used_mb")), E(StrField(d, "hbm_used_phase")));
    body += ComponentTable(d, w, zh);
    body += CrossValidation(d, w, zh);
    const json& id = Field(d, "device_id");
    if (id.is_number_integer()) body += DeviceCurve(id.get<int>(), set, w);
    body += "</section>\n";
  }
  body += WeightsBreakdown(Field(report, "weights_breakdown"), w, zh);
  body += EvidenceChain(report, w);
  body += Notes(report, w);
  const std::string title = run_id.empty() ? std::string(w.title) : fmt::format("{} — {}", w.title, run_id);
  return HtmlDocument(title, zh ? "zh" : "en", body);
}

}  // namespace

Result<std::string> RenderMemoryReportHtml(const json& doc, const HbmSeriesSet& series, const std::string& lang) {
  if (!doc.is_object())
    return Status::Invalid("memory report: expected the JSON object of `npuprof report RUN --format json` or "
                           "`npuprof manifest RUN`");
  // A manifest holds the report under "report" (its own top-level "devices" lists the device ids).
  const json& report = Field(doc, "report").is_object() ? Field(doc, "report") : doc;
  if (!Field(report, "devices").is_array())
    return Status::Invalid("memory report: no \"devices\" array, neither at the top nor under \"report\" "
                           "(is this a memory-profile run that has finished its report?)");
  try {
    return Render(doc, report, series, IsZh(lang));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("memory report: rendering failed: ") + e.what());
  }
}

}  // namespace npuprof::views
