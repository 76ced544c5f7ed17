#include "statemachine/memory_report_text.h"
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

std::string Num1(const json& v) { return v.is_number() ? fmt::format("{:.1f}", v.get<double>()) : "-"; }

std::string Thousands(double v) {
  std::string s = fmt::format("{:.1f}", v);
  const size_t dot = s.find('.');
  const size_t start = (s[0] == '-') ? 1 : 0;
  for (int i = static_cast<int>(dot) - 3; i > static_cast<int>(start); i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

std::string Mb(const json& v) { return v.is_number() ? Thousands(v.get<double>()) + " MB" : "-"; }

// The totals per node and for the deployment (memory_deployment_report.h), MB.
std::string DeploymentTotals(const json& r, bool zh) {
  static constexpr std::pair<const char*, const char*> kCols[] = {
      {"weights", "Weights"}, {"kv_cache", "KV cache"}, {"activation_peak", "Activation"}, {"residual", "Residual"}};
  std::string out = zh ? "[部署合计] (MB)\n" : "[Deployment totals] (MB)\n";
  out += fmt::format("  {:<18} | {:>7} | {:>12}", zh ? "节点" : "Node", zh ? "卡数" : "Devices", zh ? "已用" : "Used");
  for (const auto& [key, en] : kCols) out += fmt::format(" | {:>12}", en);
  out += "\n";
  const auto line = [&](const std::string& name, const json& t) {
    std::string l = fmt::format("  {:<18} | {:>7} | {:>12}", name, t.value("devices", 0),
                                Num1(t.value("hbm_used_mb", json())));
    const json& c = t.value("components_mb", json::object());
    for (const auto& [key, en] : kCols) l += fmt::format(" | {:>12}", Num1(c.value(key, json())));
    return l + "\n";
  };
  for (const auto& n : r["nodes"])
    out += line(fmt::format("{} {}", n.value("node", 0), n.value("machine", "")), n.value("totals", json::object()));
  out += line(zh ? "部署" : "deployment", r.value("totals", json::object()));
  return out + "\n";
}

}  // namespace

std::string RenderMemoryReportText(const json& r, const std::string& lang) {
  const bool zh = lang != "en";
  const Words& w = zh ? kZh : kEn;
  std::string out;
  out += fmt::format("{} mode={} tp={} dp={} msprof={}\n\n", zh ? "HBM 显存拆分报告" : "HBM memory report",
                     r.value("mode", ""), r.value("tp", 1), r.value("dp", 1),
                     r.contains("msprof") ? r["msprof"].value("status", "") : "");
  for (const auto& d : r.value("devices", json::array())) {
    const json used = d.value("hbm_used_mb", json());
    const json total = d.value("hbm_total_mb", json());
    // A deployment over several machines names each device's machine.
    const std::string where = r.contains("nodes") && d.contains("machine") && d["machine"].is_string()
                                  ? " @ " + d["machine"].get<std::string>()
                                  : "";
    out += fmt::format("[{} {}{}] {}: {} | {}: {} ({})\n\n", w.device, d.value("device_id", -1), where, w.total,
                       total.is_number() ? fmt::format("{:.2f} GiB", total.get<double>() / 1024.0) : "-", w.used,
                       used.is_number() ? fmt::format("{:.2f} GiB", used.get<double>() / 1024.0) : "-",
                       d.value("hbm_used_phase", ""));
    out += fmt::format("{:<34} | {:>12} | {:>10} | {:>7} | {}\n", w.component, w.mb, w.gib, w.share, w.source);
    out += std::string(110, '-') + "\n";
    for (const auto& c : d.value("components", json::array())) {
      const std::string key = c.value("key", "");
      std::string label = c.value(zh ? "label_zh" : "label_en", key);
      if (key == "residual") label = "  └ " + label;
      const json v = c.value("value_mb", json());
      std::string src = SourceLabel(c.value("source", ""), zh);
      const std::string status = c.value("status", "");
      if (status == "unavailable" || status == "not_reported") src += " (" + (zh ? std::string("无数据") : status) + ")";
      out += fmt::format("{:<34} | {:>12} | {:>10} | {:>7} | {}\n", label, Num1(v),
                         v.is_number() ? fmt::format("{:.3f}", v.get<double>() / 1024.0) : "-",
                         c.value("percent", json()).is_number()
                             ? fmt::format("{:.1f}%", c["percent"].get<double>())
                             : "-",
                         src);
      if (c.contains("note")) out += fmt::format("{:<34}   {}\n", "", c["note"].get<std::string>());
      for (const auto& e : c.value("evidence", json::array())) {
        std::string where = e.value("file", "");
        if (e.contains("line")) where += fmt::format(":{}", e["line"].dump());
        if (e.contains("row")) where += fmt::format(" row {}", e["row"].dump());
        const std::string blob = e.value("blob", "");
        out += fmt::format("{:<34}   <- {} [{}]", "", where, blob.substr(0, 12));
        if (e.contains("text")) out += " \"" + e["text"].get<std::string>() + "\"";
        out += "\n";
      }
      for (const auto& cor : c.value("corroboration", json::array()))
        out += fmt::format("{:<34}   ~ {} {} MB ({:+.2f}%)\n", "", SourceLabel(cor.value("source", ""), zh),
                           Num1(cor.value("value_mb", json())), cor.value("diff_pct", 0.0));
    }
    const json& xv = d.value("cross_validation", json::object());
    out += "\n" + std::string(w.xv) + "\n";
    out += fmt::format("  {:<22} {}\n", std::string(w.npu_used) + ":", Mb(xv.value("npu_smi_used_mb", json())));
    out += fmt::format("  {:<22} {}\n", std::string(w.comp_sum) + ":", Mb(xv.value("component_sum_mb", json())));
    out += fmt::format("  {:<22} {}{}\n", std::string(w.unattributed) + ":", Mb(xv.value("unattributed_mb", json())),
                       xv.value("unattributed_pct", json()).is_number()
                           ? fmt::format(" ({:.1f}%)", xv["unattributed_pct"].get<double>())
                           : "");
    if (xv.contains("msprof_app_mb"))
      out += fmt::format("  {:<22} {}\n", "msprof APP:", Mb(xv["msprof_app_mb"]));
    if (xv.contains("weights_plus_kv_mb")) {
      out += fmt::format("  {:<22} {}\n", zh ? "权重 + KV:" : "weights + KV:", Mb(xv["weights_plus_kv_mb"]));
      out += fmt::format("  {:<22} {}\n", "APP - (weights+KV):", Mb(xv["app_minus_weights_kv_mb"]));
    }
    if (xv.contains("weights_vs_safetensors_pct"))
      out += fmt::format("  {:<22} {:+.2f}%\n", zh ? "权重 vs safetensors:" : "weights vs safetensors:",
                         xv["weights_vs_safetensors_pct"].get<double>());
    if (xv.contains("weights_vs_theory_pct"))
      out += fmt::format("  {:<22} {:+.2f}%\n", zh ? "权重 vs 理论值:" : "weights vs theory:",
                         xv["weights_vs_theory_pct"].get<double>());
    out += fmt::format("  {:<22} {}\n\n", std::string(w.scope) + ":", d.value("msprof_scope", "none"));
    if (d.contains("operator_memory")) out += RenderOperatorMemoryText(d["operator_memory"], zh);
  }

  if (r.contains("nodes") && r["nodes"].is_array()) out += DeploymentTotals(r, zh);

  const json& wb = r.value("weights_breakdown", json());
  if (wb.is_object()) {
    out += std::string(w.weights_table) + "\n";
    out += fmt::format("  {:<28} | {:>10} | {:>10} | {:>7} | {}\n", w.category, "GiB", w.per_device, w.share, w.dtypes);
    for (const auto& c : wb.value("categories", json::array())) {
      std::vector<std::string> dt;
      for (const auto& x : c.value("dtypes", json::array())) dt.push_back(x.get<std::string>());
      out += fmt::format("  {:<28} | {:>10.3f} | {:>10.3f} | {:>6.1f}% | {}\n", c.value("name", ""),
                         c.value("total_gib", 0.0), c.value("per_device_gib", 0.0), c.value("share_pct", 0.0),
                         fmt::join(dt, ","));
    }
    out += fmt::format("  {:<28} | {:>10.3f} | {:>10.3f}\n", zh ? "合计" : "total", wb.value("total_gib", 0.0),
                       wb.value("per_device_gib", 0.0));
    if (wb.contains("vllm_per_device_gib")) {
      out += fmt::format("  vLLM {}: {:.3f} GiB, {} {:+.3f} GiB ({})\n", zh ? "实测每卡" : "per device",
                         wb["vllm_per_device_gib"].get<double>(), zh ? "差异" : "difference",
                         wb.value("difference_gib", 0.0),
                         wb["difference_pct"].is_number() ? fmt::format("{:+.2f}%", wb["difference_pct"].get<double>())
                                                          : "-");
      for (const auto& reason : wb.value("usual_reasons", json::array()))
        out += "    - " + reason.get<std::string>() + "\n";
    }
    out += "\n";
  }

  out += std::string(w.evidence) + "\n";
  for (const auto& e : r.value("evidence_chain", json::array()))
    out += fmt::format("  {} -> {} sha256:{}\n", e.value("what", ""), e.value("file", ""), e.value("blob", ""));
  out += "\n" + std::string(w.notes) + "\n";
  for (const auto& n : r.value("notes", json::array())) out += "  - " + n.get<std::string>() + "\n";
  return out;
}

}  // namespace npuprof::sm
