#include "statemachine/memory_report_text.h"
#include "statemachine/memory_report_view.h"
#include "statemachine/operator_memory_text.h"

#include <map>

#include <fmt/format.h>

namespace npuprof::sm {

namespace {

struct Words {
  const char* device;
  const char* total;
  const char* used;
  const char* component;
  const char* mb;
  const char* gib;
  const char* share;
  const char* source;
  const char* xv;
  const char* npu_used;
  const char* comp_sum;
  const char* unattributed;
  const char* scope;
  const char* weights_table;
  const char* category;
  const char* per_device;
  const char* dtypes;
  const char* evidence;
  const char* notes;
  const char* unavailable;
};

const Words kZh = {"Device", "总 HBM", "已用", "组件", "占用 (MB)", "占用 (GiB)", "占比", "主数据源",
                   "[交叉验证]", "npu-smi 已用", "组件加总", "未归因", "msprof 范围",
                   "[权重分解] (safetensors 文件头; 分类与分片为基于规则的推断)", "类别", "每卡 GiB",
                   "数据类型", "[证据链]", "[说明]", "不可用"};
const Words kEn = {"Device", "Total HBM", "Used", "Component", "MB", "GiB", "Share", "Source",
                   "[Cross-validation]", "npu-smi used", "Component sum", "Unattributed", "msprof scope",
                   "[Weight breakdown] (safetensors headers; categories and sharding are rule-based inference)",
                   "Category", "GiB/device", "dtypes", "[Evidence chain]", "[Notes]", "unavailable"};

std::string SourceLabel(const std::string& key, bool zh) {
  static const std::map<std::string, std::pair<const char*, const char*>> kMap = {
      {"npu_smi_baseline", {"npu-smi Phase 0 (baseline)", "npu-smi phase 0 (baseline)"}},
      {"baseline_run", {"基线取自先前运行", "baseline from an earlier run"}},
      {"baseline_file", {"基线取自 npu-smi 文件", "baseline from a saved npu-smi file"}},
      {"vllm_log", {"vLLM 日志", "vLLM log"}},
      {"safetensors", {"safetensors 文件头精确计算", "safetensors headers (exact bytes)"}},
      {"msprof_npu_module_mem", {"msprof npu_module_mem", "msprof npu_module_mem"}},
      {"npu_smi_delta", {"npu-smi delta", "npu-smi delta"}},
      {"series", {"msprof npu_mem 时间序列", "msprof npu_mem series"}},
      {"residual", {"残差", "residual"}},
      {"config_theory", {"config.json 理论值 (仅参考)", "config.json theory (reference only)"}},
      {"unavailable", {"不可用", "unavailable"}},
  };
  auto it = kMap.find(key);
  if (it == kMap.end()) return key;
  return zh ? it->second.first : it->second.second;
}

std::string Num1(const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v) : "-"; }

std::string Thousands(double v) {
  std::string s = fmt::format("{:.1f}", v);
  const size_t dot = s.find('.');
  const size_t start = (s[0] == '-') ? 1 : 0;
  for (int i = static_cast<int>(dot) - 3; i > static_cast<int>(start); i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string Mb(const std::optional<double>& v) { return v ? Thousands(*v) + " MB" : "-"; }

// The totals per node and for the deployment (memory_deployment_report.h), MB.
std::string DeploymentTotals(const MemoryReportView& r, bool zh) {
  static constexpr std::pair<const char*, const char*> kCols[] = {
      {"weights", "Weights"}, {"kv_cache", "KV cache"}, {"activation_peak", "Activation"}, {"residual", "Residual"}};
  std::string out = zh ? "[部署合计] (MB)\n" : "[Deployment totals] (MB)\n";
  out += fmt::format("  {:<18} | {:>7} | {:>12}", zh ? "节点" : "Node", zh ? "卡数" : "Devices", zh ? "已用" : "Used");
  for (const auto& [key, en] : kCols) out += fmt::format(" | {:>12}", en);
  out += "\n";
  const auto line = [&](const std::string& name, const ReportTotalsView& t) {
    std::string l = fmt::format("  {:<18} | {:>7} | {:>12}", name, t.devices, Num1(t.hbm_used_mb));
    for (const auto& [key, en] : kCols) {
      auto it = t.components_mb.find(key);
      l += fmt::format(" | {:>12}", Num1(it == t.components_mb.end() ? std::nullopt : it->second));
    }
    return l + "\n";
  };
  for (const auto& n : *r.nodes) out += line(fmt::format("{} {}", n.node, n.machine), n.totals);
  out += line(zh ? "部署" : "deployment", r.totals);
  return out + "\n";
}

std::string Gib2(const std::optional<double>& mb) { return mb ? fmt::format("{:.2f} GiB", *mb / 1024.0) : "-"; }

std::string RenderDevice(const ReportDeviceView& d, bool deployment, bool zh, const Words& w) {
  std::string out;
  // A deployment over several machines names each device's machine.
  const std::string where = deployment && d.machine ? " @ " + *d.machine : "";
  out += fmt::format("[{} {}{}] {}: {} | {}: {} ({})\n\n", w.device, d.device_id, where, w.total,
                     Gib2(d.hbm_total_mb), w.used, Gib2(d.hbm_used_mb), d.hbm_used_phase);
  out += fmt::format("{:<34} | {:>12} | {:>10} | {:>7} | {}\n", w.component, w.mb, w.gib, w.share, w.source);
  out += std::string(110, '-') + "\n";
  for (const auto& c : d.components) {
    std::string label = (zh ? c.label_zh : c.label_en).value_or(c.key);
    if (c.key == "residual") label = "  └ " + label;
    std::string src = SourceLabel(c.source, zh);
    if (c.status == "unavailable" || c.status == "not_reported")
      src += " (" + (zh ? std::string("无数据") : c.status) + ")";
    if (c.status == "evidence_error") src += zh ? " (证据解码失败)" : " (evidence failed to decode)";
    out += fmt::format("{:<34} | {:>12} | {:>10} | {:>7} | {}\n", label, Num1(c.value_mb),
                       c.value_mb ? fmt::format("{:.3f}", *c.value_mb / 1024.0) : "-",
                       c.percent ? fmt::format("{:.1f}%", *c.percent) : "-", src);
    if (c.note) out += fmt::format("{:<34}   {}\n", "", *c.note);
    for (const auto& e : c.evidence) {
      std::string at = e.file;
      if (e.line) at += fmt::format(":{}", *e.line);
      if (e.row) at += fmt::format(" row {}", *e.row);
      out += fmt::format("{:<34}   <- {} [{}]", "", at, e.blob.substr(0, 12));
      if (e.text) out += " \"" + *e.text + "\"";
      out += "\n";
    }
    for (const auto& cor : c.corroboration)
      out += fmt::format("{:<34}   ~ {} {} MB ({:+.2f}%)\n", "", SourceLabel(cor.source, zh), Num1(cor.value_mb),
                         cor.diff_pct);
  }
  const ReportCrossCheckView& xv = d.cross_validation;
  out += "\n" + std::string(w.xv) + "\n";
  out += fmt::format("  {:<22} {}\n", std::string(w.npu_used) + ":", Mb(xv.npu_smi_used_mb));
  out += fmt::format("  {:<22} {}\n", std::string(w.comp_sum) + ":", Mb(xv.component_sum_mb));
  out += fmt::format("  {:<22} {}{}\n", std::string(w.unattributed) + ":", Mb(xv.unattributed_mb),
                     xv.unattributed_pct ? fmt::format(" ({:.1f}%)", *xv.unattributed_pct) : "");
  if (xv.has_msprof_app) out += fmt::format("  {:<22} {}\n", "msprof APP:", Mb(xv.msprof_app_mb));
  if (xv.weights_plus_kv_mb) {
    out += fmt::format("  {:<22} {}\n", zh ? "权重 + KV:" : "weights + KV:", Mb(xv.weights_plus_kv_mb));
    out += fmt::format("  {:<22} {}\n", "APP - (weights+KV):", Mb(xv.app_minus_weights_kv_mb));
  }
  if (xv.weights_vs_safetensors_pct)
    out += fmt::format("  {:<22} {:+.2f}%\n", zh ? "权重 vs safetensors:" : "weights vs safetensors:",
                       *xv.weights_vs_safetensors_pct);
  if (xv.weights_vs_theory_pct)
    out += fmt::format("  {:<22} {:+.2f}%\n", zh ? "权重 vs 理论值:" : "weights vs theory:", *xv.weights_vs_theory_pct);
  out += fmt::format("  {:<22} {}\n\n", std::string(w.scope) + ":", d.msprof_scope);
  if (!d.operator_memory.is_null()) out += RenderOperatorMemoryText(d.operator_memory, zh);
  return out;
}

std::string RenderWeights(const ReportWeightsView& wb, bool zh, const Words& w) {
  std::string out = std::string(w.weights_table) + "\n";
  out += fmt::format("  {:<28} | {:>10} | {:>10} | {:>7} | {}\n", w.category, "GiB", w.per_device, w.share, w.dtypes);
  for (const auto& c : wb.categories)
    out += fmt::format("  {:<28} | {:>10.3f} | {:>10.3f} | {:>6.1f}% | {}\n", c.name, c.total_gib, c.per_device_gib,
                       c.share_pct, fmt::join(c.dtypes, ","));
  out += fmt::format("  {:<28} | {:>10.3f} | {:>10.3f}\n", zh ? "合计" : "total", wb.total_gib, wb.per_device_gib);
  if (wb.vllm_per_device_gib) {
    out += fmt::format("  vLLM {}: {:.3f} GiB, {} {:+.3f} GiB ({})\n", zh ? "实测每卡" : "per device",
                       *wb.vllm_per_device_gib, zh ? "差异" : "difference", wb.difference_gib,
                       wb.difference_pct ? fmt::format("{:+.2f}%", *wb.difference_pct) : "-");
    for (const auto& reason : wb.usual_reasons) out += "    - " + reason + "\n";
  }
  return out + "\n";
}

}  // namespace

std::string RenderMemoryReportText(const json& report, const std::string& lang) {
  const bool zh = lang != "en";
  const Words& w = zh ? kZh : kEn;
  auto view = DecodeMemoryReportView(report);
  if (!view.ok()) return fmt::format("{}: {}\n", zh ? "报告无法解码" : "the report failed to decode", view.status().message());
  const MemoryReportView& r = *view;
  std::string out;
  out += fmt::format("{} mode={} tp={} dp={} msprof={}\n\n", zh ? "HBM 显存拆分报告" : "HBM memory report", r.mode,
                     r.tp, r.dp, r.msprof_status);
  if (!r.evidence_errors.empty()) {
    out += zh ? "[证据解码错误] (相关数值不显示)\n" : "[Evidence errors] (the figures that depend on them are not shown)\n";
    for (const auto& e : r.evidence_errors) out += "  ! " + e.message + "\n";
    out += "\n";
  }
  for (const auto& d : r.devices) out += RenderDevice(d, r.nodes.has_value(), zh, w);
  if (r.nodes) out += DeploymentTotals(r, zh);
  if (r.weights_breakdown) out += RenderWeights(*r.weights_breakdown, zh, w);
  out += std::string(w.evidence) + "\n";
  for (const auto& e : r.evidence_chain) out += fmt::format("  {} -> {} sha256:{}\n", e.what, e.file, e.blob);
  out += "\n" + std::string(w.notes) + "\n";
  for (const auto& n : r.notes) out += "  - " + n + "\n";
  return out;
}

}  // namespace npuprof::sm
