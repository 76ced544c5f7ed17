// The memory report (BuildMemoryReport's JSON, memory_report.h) as a typed
// view, decoded once for the renderers (memory_report_text.h). Pure.
//
// Contract: DecodeMemoryReportView reads every field the text renderer
// shows. The report is our own output, so a field that is there with the
// wrong shape is an error naming its path ("devices[0].components[2].value_mb
// must be a number, not a string"), never read as 0; an absent field keeps
// the renderer's fallback (an absent figure prints "-"). Device entries'
// "operator_memory" is kept as JSON for RenderOperatorMemoryText.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

struct ReportCiteView {
  std::string file, blob;
  std::optional<int64_t> line, row;
  std::optional<std::string> text;
};

struct ReportCorroborationView {
  std::string source;
  std::optional<double> value_mb;
  double diff_pct = 0;
};

struct ReportComponentView {
  std::string key, source, status;
  std::optional<std::string> label_zh, label_en, note;
  std::optional<double> value_mb, percent;
  std::vector<ReportCiteView> evidence;
  std::vector<ReportCorroborationView> corroboration;
};

struct ReportCrossCheckView {
  std::optional<double> npu_smi_used_mb, component_sum_mb, unattributed_mb, unattributed_pct;
  bool has_msprof_app = false;  // the key is there (null: msprof gave no APP row)
  std::optional<double> msprof_app_mb;
  std::optional<double> weights_plus_kv_mb, app_minus_weights_kv_mb;
  std::optional<double> weights_vs_safetensors_pct, weights_vs_theory_pct;
};

struct ReportDeviceView {
  int64_t device_id = -1;
  std::optional<std::string> machine;
  std::optional<double> hbm_used_mb, hbm_total_mb;
  std::string hbm_used_phase, msprof_scope = "none";
  std::vector<ReportComponentView> components;
  ReportCrossCheckView cross_validation;
  json operator_memory;  // null when absent
};

struct ReportTotalsView {
  int64_t devices = 0;
  std::optional<double> hbm_used_mb;
  std::map<std::string, std::optional<double>> components_mb;
};

struct ReportNodeView {
  int64_t node = 0;
  std::string machine;
  ReportTotalsView totals;
};

struct ReportWeightCategoryView {
  std::string name;
  double total_gib = 0, per_device_gib = 0, share_pct = 0;
  std::vector<std::string> dtypes;
};

struct ReportWeightsView {
  std::vector<ReportWeightCategoryView> categories;
  double total_gib = 0, per_device_gib = 0;
  std::optional<double> vllm_per_device_gib, difference_pct;
  double difference_gib = 0;
  std::vector<std::string> usual_reasons;
};

struct ReportChainView {
  std::string what, file, blob;
};

struct ReportErrorView {
  std::string path, message;
};

struct MemoryReportView {
  std::string mode, msprof_status;
  int64_t tp = 1, dp = 1;
  std::vector<ReportDeviceView> devices;
  std::optional<std::vector<ReportNodeView>> nodes;  // a deployment over several machines
  ReportTotalsView totals;
  std::optional<ReportWeightsView> weights_breakdown;
  std::vector<ReportChainView> evidence_chain;
  std::vector<std::string> notes;
  std::vector<ReportErrorView> evidence_errors;
};

Result<MemoryReportView> DecodeMemoryReportView(const json& report);

}  // namespace npuprof::sm
