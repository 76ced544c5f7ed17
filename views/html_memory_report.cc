#include "views/html_memory_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common/utf8.h"
#include "views/charts.h"
#include "views/html_operator_memory.h"

namespace npuprof::views {

namespace {

// The labels of the page (zh, en); the zh words are those of the text report.
constexpr Label kTitle{"HBM 显存拆分报告", "HBM memory report"};
constexpr Label kRun{"运行", "Run"};
constexpr Label kStatus{"状态", "Status"};
constexpr Label kOverview{"各卡 HBM 组成", "HBM per device"};
constexpr Label kDevice{"Device", "Device"};
constexpr Label kTotal{"总 HBM", "Total HBM"};
constexpr Label kUsed{"已用", "Used"};
constexpr Label kComponent{"组件", "Component"};
constexpr Label kMb{"占用 (MB)", "MB"};
constexpr Label kGib{"占用 (GiB)", "GiB"};
constexpr Label kShare{"占比", "Share"};
constexpr Label kSource{"主数据源", "Source"};
constexpr Label kEvidence{"证据", "Evidence"};
constexpr Label kXv{"交叉验证", "Cross-validation"};
constexpr Label kNpuUsed{"npu-smi 已用", "npu-smi used"};
constexpr Label kCompSum{"组件加总", "Component sum"};
constexpr Label kUnattributed{"未归因", "Unattributed"};
constexpr Label kScope{"msprof 范围", "msprof scope"};
constexpr Label kWeightsTable{
    "权重分解 (safetensors 文件头; 分类与分片为基于规则的推断)",
    "Weight breakdown (safetensors headers; categories and sharding are rule-based inference)"};
constexpr Label kCategory{"类别", "Category"};
constexpr Label kPerDevice{"每卡 GiB", "GiB/device"};
constexpr Label kDtypes{"数据类型", "dtypes"};
constexpr Label kChain{"证据链", "Evidence chain"};
constexpr Label kNotes{"说明", "Notes"};
constexpr Label kEvidenceErrors{"证据解码错误 (相关数值不显示)",
                                "Evidence errors (the figures that depend on them are not shown)"};
constexpr Label kFree{"空闲", "free"};
constexpr Label kHbmOverTime{"HBM 随时间变化 (msprof npu_mem)", "HBM over time (msprof npu_mem)"};
constexpr Label kNoSeries{"本设备没有 msprof npu_mem 时间序列。",
                          "No msprof npu_mem series for this device."};
constexpr Label kTime{"时间", "time"};
constexpr Label kWhat{"内容", "What"};
constexpr Label kFile{"文件", "File"};
constexpr Label kTensors{"张量数", "Tensors"};
constexpr Label kPhaseBaseline{"基线", "baseline"};
constexpr Label kPhaseLaunch{"启动", "launch"};
constexpr Label kPhaseReady{"就绪", "ready"};
constexpr Label kPhaseInference{"推理窗口", "inference"};
constexpr Label kPhaseStop{"停止", "stop"};
constexpr Label kPeakFromSeries{"激活峰值 (时间序列)", "activation peak (series)"};

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
      {"series", "msprof npu_mem 时间序列", "msprof npu_mem series"},
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

std::string ComponentTable(const json& dev, const Words& w, bool zh) {
  HtmlTable t({w(kComponent), w(kMb), w(kGib), w(kShare), w(kSource), w(kEvidence)},
              {false, true, true, true, false, false});
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

std::string CrossValidation(const json& dev, const Words& w, bool zh) {
  const json& xv = Field(dev, "cross_validation");
  std::vector<std::pair<std::string, std::string>> kv = {
      {w(kNpuUsed), MbCell(Field(xv, "npu_smi_used_mb")) + " MB"},
      {w(kCompSum), MbCell(Field(xv, "component_sum_mb")) + " MB"},
      {w(kUnattributed), MbCell(Field(xv, "unattributed_mb")) + " MB" +
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
  kv.emplace_back(w(kScope), E(StrField(dev, "msprof_scope", "none")));
  return Heading(3, w(kXv)) + KeyValues(kv);
}

std::string PhaseLabel(const std::string& key, const Words& w) {
  if (key == "baseline") return w(kPhaseBaseline);
  if (key == "launch") return w(kPhaseLaunch);
  if (key == "ready") return w(kPhaseReady);
  if (key == "inference") return w(kPhaseInference);
  if (key == "stop") return w(kPhaseStop);
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

// The curve of device `dev` of `machine` ("" for a run on one machine).
std::string DeviceCurve(int dev, const std::string& machine, const HbmSeriesSet& set, const Words& w,
                        const json& operator_memory = nullptr) {
  std::string out = Heading(3, w(kHbmOverTime));
  const double origin = Origin(set);
  TimeChartInput in;
  in.x_label = w(kTime);
  in.y_label = "HBM";
  for (const auto& s : set.series) {
    if (s.device_id != dev || s.machine != machine || s.samples.empty()) continue;
    TimeLine line;
    line.label = fmt::format("{} {}{} ({})", w(kDevice), dev, machine.empty() ? "" : " @ " + machine,
                             s.event.empty() ? "npu_mem" : s.event);
    for (const auto& p : s.samples) line.points.push_back({(p.t_us - origin) / 1e6, p.mb});
    in.lines.push_back(std::move(line));
  }
  if (in.lines.empty()) return out + "<p class=\"note\">" + E(w(kNoSeries)) + "</p>\n";
  for (const auto& p : set.phases) {
    TimePhase ph{p.key, PhaseLabel(p.key, w), (p.start_us - origin) / 1e6, std::nullopt};
    if (p.end_us) ph.end_s = (*p.end_us - origin) / 1e6;
    in.phases.push_back(std::move(ph));
  }
  // --operator-memory: the peak and its top operator (html_operator_memory.h).
  if (auto marker = OperatorPeakMarker(operator_memory, origin, w.zh())) in.phases.push_back(std::move(*marker));
  for (const auto& pk : set.peaks) {
    if (pk.device_id != dev || pk.machine != machine) continue;
    in.peak = TimePeak{(pk.t_us - origin) / 1e6, pk.peak_mb, pk.base_mb,
                       fmt::format("{} +{} MB", w(kPeakFromSeries), FormatMbValue(pk.delta_mb))};
  }
  out += "<div class=\"chart\">" + HbmTimeChart(in) + "</div>\n";
  std::string files;
  for (const auto& s : set.series)
    if (s.device_id == dev && s.machine == machine && !s.samples.empty())
      files += fmt::format("<div>&#8592; {} ({} rows){}</div>", E(s.file), s.samples.size(),
                           s.blob.empty() ? "" : " [" + E(Short(s.blob)) + "]");
  return out + "<div class=\"ev\">" + files + "</div>\n";
}

std::string Overview(const json& devices, const Words& w, bool zh) {
  std::vector<DeviceBar> bars;
  for (const auto& d : devices) {
    DeviceBar b;
    b.label = fmt::format("{} {}", w(kDevice), CellText(Field(d, "device_id")));
    if (Field(d, "node").is_number_integer()) b.label += " @ " + StrField(d, "machine");
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
  BarChartWords bw{w(kFree), w(kUsed), w(kTotal)};
  return Heading(2, w(kOverview), "overview") + "<div class=\"chart\">" + StackedHbmBars(bars, bw) + "</div>\n";
}

// A deployment over several machines: its totals per node and in all (MB).
std::string DeploymentTotals(const json& report, bool zh) {
  if (!Field(report, "nodes").is_array()) return "";
  static constexpr const char* kKeys[] = {"weights", "kv_cache", "activation_peak", "residual"};
  HtmlTable t({zh ? "节点" : "node", zh ? "卡数" : "devices", zh ? "已用 MB" : "used MB", "weights MB", "KV cache MB",
               "activation MB", "residual MB"},
              {false, true, true, true, true, true, true});
  const auto mb = [](const json& v) { return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : std::string("-"); };
  const auto row = [&](const std::string& name, const json& totals) {
    std::vector<std::string> cells = {E(name), E(CellText(Field(totals, "devices"))), mb(Field(totals, "hbm_used_mb"))};
    for (const char* k : kKeys) cells.push_back(mb(Field(Field(totals, "components_mb"), k)));
    t.Row(cells);
  };
  for (const auto& n : ArrField(report, "nodes"))
    row(fmt::format("{} {}", CellText(Field(n, "node")), StrField(n, "machine")), Field(n, "totals"));
  row(zh ? "部署" : "deployment", Field(report, "totals"));
  return Heading(2, zh ? "部署合计" : "Deployment totals", "deployment") + t.Finish();
}

std::string WeightsBreakdown(const json& wb, const Words& w, bool zh) {
  if (!wb.is_object()) return "";
  std::string out = Heading(2, w(kWeightsTable), "weights");
  HtmlTable t({w(kCategory), w(kTensors), "GiB", w(kPerDevice), w(kShare), w(kDtypes)},
              {false, true, true, true, true, false});
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

std::string EvidenceChain(const json& report, const Words& w) {
  HtmlTable t({w(kWhat), w(kFile), "sha256"});
  for (const auto& e : ArrField(report, "evidence_chain"))
    t.Row({E(StrField(e, "what")), "<code>" + E(StrField(e, "file")) + "</code>",
           "<code>" + E(StrField(e, "blob")) + "</code>"});
  return Heading(2, w(kChain), "evidence") + t.Finish();
}

std::string Notes(const json& report, const Words& w) {
  std::string items;
  for (const auto& n : ArrField(report, "notes")) items += "<li>" + E(CellText(n)) + "</li>";
  return items.empty() ? "" : Heading(2, w(kNotes), "notes") + "<ul>" + items + "</ul>\n";
}

// The documents that failed to decode (docs/BEHAVIOUR.md#mem-evidence-errors).
std::string EvidenceErrors(const json& report, const Words& w) {
  std::string items;
  for (const auto& e : ArrField(report, "evidence_errors")) items += "<li>" + E(StrField(e, "message")) + "</li>";
  return items.empty() ? "" : Heading(2, w(kEvidenceErrors), "evidence-errors") + "<ul>" + items + "</ul>\n";
}

std::string Render(const json& doc, const json& report, const HbmSeriesSet& set, bool zh) {
  const Words w(zh);
  const std::string run_id = StrField(doc, "run_id");
  const std::string status = StrField(doc, "status");
  const json& msprof = Field(report, "msprof");
  std::string body = Heading(1, w(kTitle));
  std::vector<std::pair<std::string, std::string>> head;
  if (!run_id.empty()) head.emplace_back(w(kRun), "<code>" + E(run_id) + "</code>");
  if (!status.empty()) head.emplace_back(w(kStatus), StatusBadge(status));
  if (Field(doc, "model").is_string()) head.emplace_back("model", "<code>" + E(StrField(doc, "model")) + "</code>");
  head.emplace_back("mode", E(StrField(report, "mode", StrField(doc, "mode"))));
  head.emplace_back("tp / dp", E(CellText(Field(report, "tp"))) + " / " + E(CellText(Field(report, "dp"))));
  head.emplace_back("msprof", E(StrField(msprof, "status", "-")));
  if (Field(doc, "error").is_string()) head.emplace_back("error", E(StrField(doc, "error")));
  body += "<section class=\"card\">" + KeyValues(head) + "</section>\n";
  body += EvidenceErrors(report, w);

  const json& devices = ArrField(report, "devices");
  body += Overview(devices, w, zh);
  body += DeploymentTotals(report, zh);
  for (const auto& d : devices) {
    const std::string dev = CellText(Field(d, "device_id"));
    // A deployment over several machines: the device's machine, whose
    // series the curve draws.
    const std::string machine = Field(report, "nodes").is_array() ? StrField(d, "machine") : "";
    const std::string anchor = machine.empty() ? "device-" + dev : "device-" + machine + "-" + dev;
    body += "<section class=\"card\">";
    body += Heading(2, fmt::format("{} {}{}", w(kDevice), dev, machine.empty() ? "" : " @ " + machine), anchor);
    body += fmt::format("<p class=\"sub\">{}: {} | {}: {} ({})</p>\n", E(w(kTotal)), GibText(Field(d, "hbm_total_mb")),
                        E(w(kUsed)), GibText(Field(d, "hbm_used_mb")), E(StrField(d, "hbm_used_phase")));
    body += ComponentTable(d, w, zh);
    body += CrossValidation(d, w, zh);
    const json& id = Field(d, "device_id");
    if (id.is_number_integer()) body += DeviceCurve(id.get<int>(), machine, set, w, Field(d, "operator_memory"));
    body += OperatorMemoryHtml(Field(d, "operator_memory"), zh);
    body += "</section>\n";
  }
  body += WeightsBreakdown(Field(report, "weights_breakdown"), w, zh);
  body += EvidenceChain(report, w);
  body += Notes(report, w);
  const std::string title = run_id.empty() ? std::string(w(kTitle)) : fmt::format("{} — {}", w(kTitle), run_id);
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
