// DecodeMemoryReportView: see memory_report_view.h.
#include "statemachine/memory_report_view.h"

#include <fmt/format.h>

#include "statemachine/evidence_doc.h"

namespace npuprof::sm {

namespace {

using Doc = EvidenceDoc;
#define NP_TRY(expr) NP_EVIDENCE_TRY(expr)

// Calls fn(Doc) for each object of the array at `key` (absent: none).
template <typename Fn>
Status EachObject(const Doc& d, const char* key, Fn fn) {
  NP_TRY(d.Array(key));
  if (!d.Has(key)) return Status::Ok();
  size_t i = 0;
  for (const auto& x : d.At(key)) {
    const Doc xd(x, d.PathOf(fmt::format("{}[{}]", key, i++)));
    if (!x.is_object()) return Status::Corruption(fmt::format("{} must be an object", xd.path()));
    NP_TRY(fn(xd));
  }
  return Status::Ok();
}

Status DecodeComponent(const Doc& d, ReportComponentView& c) {
  NP_TRY(d.Str("key", c.key));
  NP_TRY(d.Str("source", c.source));
  NP_TRY(d.Str("status", c.status));
  NP_TRY(d.Str("label_zh", c.label_zh));
  NP_TRY(d.Str("label_en", c.label_en));
  NP_TRY(d.Str("note", c.note));
  NP_TRY(d.Num("value_mb", c.value_mb));
  NP_TRY(d.Num("percent", c.percent));
  NP_TRY(EachObject(d, "evidence", [&](const Doc& e) {
    ReportCiteView v;
    NP_TRY(e.Str("file", v.file));
    NP_TRY(e.Str("blob", v.blob));
    NP_TRY(e.Int("line", v.line));
    NP_TRY(e.Int("row", v.row));
    NP_TRY(e.Str("text", v.text));
    c.evidence.push_back(std::move(v));
    return Status::Ok();
  }));
  return EachObject(d, "corroboration", [&](const Doc& e) {
    ReportCorroborationView v;
    std::optional<double> pct;
    NP_TRY(e.Str("source", v.source));
    NP_TRY(e.Num("value_mb", v.value_mb));
    NP_TRY(e.Num("diff_pct", pct));
    v.diff_pct = pct.value_or(0);
    c.corroboration.push_back(std::move(v));
    return Status::Ok();
  });
}

Status DecodeCrossCheck(const Doc& x, ReportCrossCheckView& v) {
  NP_TRY(x.Num("npu_smi_used_mb", v.npu_smi_used_mb));
  NP_TRY(x.Num("component_sum_mb", v.component_sum_mb));
  NP_TRY(x.Num("unattributed_mb", v.unattributed_mb));
  NP_TRY(x.Num("unattributed_pct", v.unattributed_pct));
  v.has_msprof_app = x.raw().is_object() && x.raw().contains("msprof_app_mb");
  NP_TRY(x.Num("msprof_app_mb", v.msprof_app_mb));
  NP_TRY(x.Num("weights_plus_kv_mb", v.weights_plus_kv_mb));
  NP_TRY(x.Num("app_minus_weights_kv_mb", v.app_minus_weights_kv_mb));
  NP_TRY(x.Num("weights_vs_safetensors_pct", v.weights_vs_safetensors_pct));
  return x.Num("weights_vs_theory_pct", v.weights_vs_theory_pct);
}

Status DecodeDevice(const Doc& d, ReportDeviceView& v) {
  std::optional<int64_t> id;
  NP_TRY(d.Int("device_id", id));
  v.device_id = id.value_or(-1);
  // A device's machine is shown only when it is a string.
  if (d.Has("machine") && d.At("machine").is_string()) v.machine = d.At("machine").get<std::string>();
  NP_TRY(d.Num("hbm_used_mb", v.hbm_used_mb));
  NP_TRY(d.Num("hbm_total_mb", v.hbm_total_mb));
  NP_TRY(d.Str("hbm_used_phase", v.hbm_used_phase));
  NP_TRY(d.Str("msprof_scope", v.msprof_scope));
  NP_TRY(EachObject(d, "components", [&](const Doc& c) {
    ReportComponentView cv;
    NP_TRY(DecodeComponent(c, cv));
    v.components.push_back(std::move(cv));
    return Status::Ok();
  }));
  NP_TRY(d.Object("cross_validation"));
  NP_TRY(DecodeCrossCheck(d.Sub("cross_validation"), v.cross_validation));
  if (d.Has("operator_memory")) v.operator_memory = d.At("operator_memory");
  return Status::Ok();
}

Status DecodeTotals(const Doc& t, ReportTotalsView& v) {
  std::optional<int64_t> devices;
  NP_TRY(t.Int("devices", devices));
  v.devices = devices.value_or(0);
  NP_TRY(t.Num("hbm_used_mb", v.hbm_used_mb));
  NP_TRY(t.Object("components_mb"));
  const Doc c = t.Sub("components_mb");
  if (!c.present()) return Status::Ok();
  for (auto it = c.raw().begin(); it != c.raw().end(); ++it) {
    std::optional<double> x;
    NP_TRY(c.Num(it.key().c_str(), x));
    v.components_mb[it.key()] = x;
  }
  return Status::Ok();
}

Status DecodeWeights(const Doc& w, ReportWeightsView& v) {
  NP_TRY(EachObject(w, "categories", [&](const Doc& c) {
    ReportWeightCategoryView cv;
    std::optional<double> total, per_device, share;
    NP_TRY(c.Str("name", cv.name));
    NP_TRY(c.Num("total_gib", total));
    NP_TRY(c.Num("per_device_gib", per_device));
    NP_TRY(c.Num("share_pct", share));
    NP_TRY(c.Strs("dtypes", cv.dtypes));
    cv.total_gib = total.value_or(0);
    cv.per_device_gib = per_device.value_or(0);
    cv.share_pct = share.value_or(0);
    v.categories.push_back(std::move(cv));
    return Status::Ok();
  }));
  std::optional<double> total, per_device, diff;
  NP_TRY(w.Num("total_gib", total));
  NP_TRY(w.Num("per_device_gib", per_device));
  NP_TRY(w.Num("difference_gib", diff));
  v.total_gib = total.value_or(0);
  v.per_device_gib = per_device.value_or(0);
  v.difference_gib = diff.value_or(0);
  NP_TRY(w.Num("vllm_per_device_gib", v.vllm_per_device_gib));
  NP_TRY(w.Num("difference_pct", v.difference_pct));
  return w.Strs("usual_reasons", v.usual_reasons);
}

}  // namespace

Result<MemoryReportView> DecodeMemoryReportView(const json& report) {
  if (!report.is_object()) return Status::Corruption("the memory report must be an object");
  const Doc r(report, "");
  MemoryReportView v;
  std::optional<int64_t> tp, dp;
  NP_TRY(r.Str("mode", v.mode));
  NP_TRY(r.Int("tp", tp));
  NP_TRY(r.Int("dp", dp));
  v.tp = tp.value_or(1);
  v.dp = dp.value_or(1);
  NP_TRY(r.Object("msprof"));
  NP_TRY(r.Sub("msprof").Str("status", v.msprof_status));
  NP_TRY(EachObject(r, "devices", [&](const Doc& d) {
    ReportDeviceView dv;
    NP_TRY(DecodeDevice(d, dv));
    v.devices.push_back(std::move(dv));
    return Status::Ok();
  }));
  if (r.Has("nodes")) {
    v.nodes.emplace();
    NP_TRY(EachObject(r, "nodes", [&](const Doc& n) {
      ReportNodeView nv;
      std::optional<int64_t> node;
      NP_TRY(n.Int("node", node));
      nv.node = node.value_or(0);
      NP_TRY(n.Str("machine", nv.machine));
      NP_TRY(n.Object("totals"));
      NP_TRY(DecodeTotals(n.Sub("totals"), nv.totals));
      v.nodes->push_back(std::move(nv));
      return Status::Ok();
    }));
    NP_TRY(r.Object("totals"));
    NP_TRY(DecodeTotals(r.Sub("totals"), v.totals));
  }
  NP_TRY(r.Object("weights_breakdown"));
  if (r.Has("weights_breakdown")) {
    v.weights_breakdown.emplace();
    NP_TRY(DecodeWeights(r.Sub("weights_breakdown"), *v.weights_breakdown));
  }
  NP_TRY(EachObject(r, "evidence_chain", [&](const Doc& e) {
    ReportChainView c;
    NP_TRY(e.Str("what", c.what));
    NP_TRY(e.Str("file", c.file));
    NP_TRY(e.Str("blob", c.blob));
    v.evidence_chain.push_back(std::move(c));
    return Status::Ok();
  }));
  NP_TRY(r.Strs("notes", v.notes));
  NP_TRY(EachObject(r, "evidence_errors", [&](const Doc& e) {
    ReportErrorView x;
    NP_TRY(e.Str("path", x.path));
    NP_TRY(e.Str("message", x.message));
    v.evidence_errors.push_back(std::move(x));
    return Status::Ok();
  }));
  return v;
}

}  // namespace npuprof::sm
