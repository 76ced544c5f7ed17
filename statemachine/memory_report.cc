// BuildMemoryReport: see memory_report.h. Output layout:
// {"schema_version":1, "mode", "tp", "dp", "msprof": {"status","available"},
//  "devices": [{"device_id", "hbm_used_mb", "hbm_total_mb", "hbm_used_phase",
//     "msprof_scope": "device"|"process"|"none",
//     "components": [{"key","label_zh","label_en","value_mb"|null,"value_gib",
//        "percent","source","status","evidence":[...],"corroboration":[...],"note"}],
//     "cross_validation": {...}}],
//  "weights_breakdown": {...}|null, "evidence_chain": [...], "notes": [...],
//  "evidence_errors": [{"document","message"}] (only when a document failed to decode)}
// The input is decoded once into typed documents (memory_report_input.h);
// nothing here reads the input JSON key by key.
#include "statemachine/memory_report.h"
#include "statemachine/operator_memory_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "statemachine/memory_deployment_report.h"
#include "statemachine/evidence_doc.h"
#include "statemachine/memory_report_input.h"

namespace npuprof::sm {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }


json Opt(const std::optional<double>& v) { return v ? json(R3(*v)) : json(nullptr); }

struct Component {
  std::string key, label_zh, label_en;
  std::optional<double> value;
  std::string source;  // stable key, see SourceLabel in memory_report_text.cc
  std::string status = "measured";
  json evidence = json::array();
  json corroboration = json::array();
  std::string note;
};

json ComponentJson(const Component& c, std::optional<double> used) {
  json j = {{"key", c.key},       {"label_zh", c.label_zh},
            {"label_en", c.label_en}, {"value_mb", Opt(c.value)},
            {"value_gib", c.value ? json(R3(*c.value / 1024.0)) : json(nullptr)},
            {"percent", (c.value && used && *used > 0) ? json(R3(*c.value / *used * 100.0)) : json(nullptr)},
            {"source", c.source}, {"status", c.status},
            {"evidence", c.evidence}};
  if (!c.corroboration.empty()) j["corroboration"] = c.corroboration;
  if (!c.note.empty()) j["note"] = c.note;
  return j;
}

double DiffPct(double a, double b) { return b != 0 ? R3((a - b) / b * 100.0) : 0.0; }

// ---- vLLM log -----------------------------------------------------------

struct LogValue {
  std::optional<double> gib;
  json evidence;  // {"blob","file","field","line","text","process"}
};

json LogCiteJson(const VllmLogInput& vlog, const std::string& field, const LogCite* cite) {
  json e = {{"blob", vlog.blob.value_or("")}, {"file", vlog.file.value_or("vllm_serve.log")}, {"field", field}};
  if (cite) {
    e["line"] = cite->line.value_or(0);
    e["text"] = cite->text.value_or("");
  }
  return e;
}

const LogCite* CiteOf(const LogFigures& f, const std::string& field) {
  auto it = f.evidence.find(field);
  return it == f.evidence.end() ? nullptr : &it->second;
}

// The value of `field` for the rank on `rank_index`, else the run-level one.
LogValue LogFieldForRank(const VllmLogInput& vlog, const char* field, std::optional<int> rank_index, int tp) {
  LogValue out;
  if (!vlog.usable()) return out;
  if (rank_index) {
    for (const auto& [prefix, figures] : vlog.ranks) {
      if (RankFromLogPrefix(prefix, tp) != rank_index) continue;
      if (auto v = figures.Get(field)) {
        out.gib = v;
        out.evidence = LogCiteJson(vlog, field, CiteOf(figures, field));
        out.evidence["process"] = prefix;
        return out;
      }
    }
  }
  if (auto v = vlog.run.Get(field)) {
    out.gib = v;
    out.evidence = LogCiteJson(vlog, field, CiteOf(vlog.run, field));
  }
  return out;
}

// ---- msprof -------------------------------------------------------------

struct MsprofPick {
  std::map<std::string, const ModuleMemRow*> best;  // component -> row with the largest max_mb
  std::string scope = "none";
};

MsprofPick PickMsprof(const MsprofInput& msprof, int dev) {
  MsprofPick pick;
  if (!msprof.usable()) return pick;
  for (const char* pass : {"device", "process"}) {
    for (const auto& r : msprof.module_mem) {
      if (std::string(pass) == "device" && r.device_id != dev) continue;
      if (std::string(pass) == "process" && r.device_id) continue;
      auto it = pick.best.find(r.component);
      if (it == pick.best.end() || r.max_mb > it->second->max_mb) pick.best[r.component] = &r;
    }
    if (!pick.best.empty()) {
      pick.scope = pass;
      break;
    }
  }
  return pick;
}

json MsprofEvidence(const ModuleMemRow& r) {
  return {{"blob", r.blob},        {"file", "msprof_csvs/" + r.file},
          {"row", r.row},          {"component", r.component},
          {"raw", r.raw},          {"timestamp", r.timestamp},
          {"value_mb", R3(r.max_mb)}, {"prof_dir", r.prof_dir}};
}

const NpuMemRow* MsprofAppPeak(const MsprofInput& msprof, int dev) {
  const NpuMemRow* best = nullptr;
  if (!msprof.usable()) return best;
  for (const auto& r : msprof.npu_mem) {
    if (r.event != "APP" || r.device_id != dev) continue;
    if (!best || *r.max_hbm_mb > *best->max_hbm_mb) best = &r;
  }
  return best;
}

// The activation peak the collect step measured on this device's npu_mem
// "Device" series (msprof.activation_peaks), if any.
const SeriesPeakInput* SeriesPeak(const MsprofInput& msprof, int dev) {
  if (!msprof.usable()) return nullptr;
  for (const auto& r : msprof.activation_peaks)
    if (r.device_id == dev) return &r;
  return nullptr;
}

json SeriesEvidence(const SeriesPeakInput& p) {
  return {{"blob", p.blob},
          {"file", "msprof_csvs/" + p.file},
          {"event", p.event},
          {"row", p.peak_row.value_or(0)},
          {"peak_mb", Opt(p.peak_mb)},
          {"base_mb", Opt(p.base_mb)},
          {"base_rows", p.base_rows},
          {"window_rows", p.window_rows},
          {"window", p.window},
          {"clock", p.clock ? json(*p.clock) : json(nullptr)},
          {"value_mb", Opt(p.value_mb)}};
}

// ---- labels -------------------------------------------------------------

struct Label {
  const char* zh;
  const char* en;
};

Label LabelOf(const std::string& key, bool msprof) {
  static const std::map<std::string, Label> kLabels = {
      {"fixed_overhead", {"固定开销 (driver/runtime)", "Fixed overhead (driver/runtime)"}},
      {"weights", {"模型权重", "Model weights"}},
      {"kv_cache", {"KV Cache 预留", "KV cache reserve"}},
      {"graph_capture", {"ACL Graph 编译缓冲", "ACL graph capture buffer"}},
      {"hccl", {"HCCL 缓冲", "HCCL buffers"}},
      {"runtime", {"CANN Runtime", "CANN runtime"}},
      {"slog", {"SLOG", "SLOG"}},
      {"msprof_other", {"其他 msprof 组件", "Other msprof components"}},
      {"activation_peak", {"激活峰值", "Activation peak"}},
  };
  if (key == "residual")
    return msprof ? Label{"未归因残差", "Unattributed residual"}
                  : Label{"未归因 (缺少 msprof 数据)", "Unattributed (msprof data missing)"};
  return kLabels.at(key);
}

Component Make(const std::string& key, bool msprof) {
  Component c;
  c.key = key;
  Label l = LabelOf(key, msprof);
  c.label_zh = l.zh;
  c.label_en = l.en;
  return c;
}

json SnapshotEvidence(const SnapshotInput& snap, int dev, const char* fallback_file) {
  return {{"blob", snap.blob.value_or("")},
          {"file", snap.file.value_or(fallback_file)},
          {"device", std::to_string(dev)},
          {"field", "used_mb"},
          {"value_mb", Opt(snap.Used(dev))}};
}

// A component with no figure whose source failed to decode says so.
void MarkDecodeError(Component& c, std::initializer_list<const InputDoc*> sources) {
  if (c.value) return;
  for (const InputDoc* d : sources) {
    if (!d->failed()) continue;
    c.source = "unavailable";
    c.status = "evidence_error";
    c.note = "evidence failed to decode: " + d->error;
    return;
  }
}

// ---- one device ---------------------------------------------------------

struct DeviceOut {
  json report;
  bool msprof = false;                        // msprof_scope != "none"
  std::optional<double> vllm_weights_mb;      // the weights line when it came from the vLLM log
};

DeviceOut DeviceReport(const MemoryReportInput& ev, int dev, int rank_index, int tp) {
  const SnapshotInput& baseline = ev.baseline;
  const SnapshotInput& ready = ev.after_ready;
  const SnapshotInput& infer = ev.after_infer;
  const VllmLogInput& vlog = ev.vllm_log;
  const MsprofInput& msprof = ev.msprof;
  const WeightsInput& weights = ev.weights;
  const WeightsInput& theory = ev.theory;

  const MsprofPick pick = PickMsprof(msprof, dev);
  const bool have_msprof = !pick.best.empty();

  const auto used_ready = ready.Used(dev);
  const auto used_infer = infer.Used(dev);
  std::optional<double> total = infer.Total(dev);
  if (!total) total = ready.Total(dev);
  if (!total) total = baseline.Total(dev);
  const std::optional<double> smi_used = used_infer ? used_infer : used_ready;
  std::optional<double> used = smi_used;
  const char* used_phase = used_infer ? "after_infer" : (used_ready ? "after_ready" : "none");
  // The series' peak, when msprof measured one: the HBM the components add
  // up to is then the level at that peak (after ready + the peak).
  const SeriesPeakInput* series = SeriesPeak(msprof, dev);
  const bool series_ok = series && series->ok && series->value_mb && used_ready;
  if (series_ok) {
    used = *used_ready + *series->value_mb;
    used_phase = "inference_peak";
  }

  std::vector<Component> comps;

  // Fixed overhead.
  {
    Component c = Make("fixed_overhead", have_msprof);
    if (auto v = baseline.Used(dev)) {
      c.value = v;
      const std::string src = baseline.source.value_or("npu_smi");
      c.source = src == "npu_smi" ? "npu_smi_baseline" : src;
      json e = SnapshotEvidence(baseline, dev, "baseline_npu_smi.txt");
      if (baseline.origin) e["origin"] = *baseline.origin;
      c.evidence.push_back(e);
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = baseline.present ? "the baseline npu-smi snapshot has no entry for this device"
                                : "no baseline: attach mode without --baseline-from RUN|FILE";
    }
    MarkDecodeError(c, {&baseline});
    comps.push_back(c);
  }

  // Weights: vLLM log > safetensors per-device > unavailable.
  std::optional<double> vs_safetensors_pct, vs_theory_pct;
  {
    Component c = Make("weights", have_msprof);
    LogValue lv = LogFieldForRank(vlog, "weights_gib", rank_index, tp);
    std::optional<double> st_mb, th_mb;
    if (weights.usable() && weights.per_device_bytes) st_mb = *weights.per_device_bytes / kMiB;
    if (theory.usable() && theory.per_device_bytes) th_mb = *theory.per_device_bytes / kMiB;
    json st_ev = nullptr;
    if (weights.usable())
      st_ev = {{"blob", weights.blob.value_or("")}, {"file", weights.file.value_or("weight_manifest.json")},
               {"field", "per_device_bytes"}, {"value", weights.per_device_bytes.value_or(0)}};
    if (lv.gib) {
      c.value = *lv.gib * 1024.0;
      c.source = "vllm_log";
      c.evidence.push_back(lv.evidence);
    } else if (st_mb) {
      c.value = st_mb;
      c.source = "safetensors";
      c.evidence.push_back(st_ev);
      c.note = vlog.failed() ? "the vLLM log failed to decode; safetensors per-device bytes used (shard rules are a "
                               "rule-based inference)"
                             : "vLLM log reported no weights; safetensors per-device bytes used (shard rules are a "
                               "rule-based inference)";
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "neither the vLLM log nor safetensors headers gave the weights";
    }
    if (c.value) {
      if (c.source != "safetensors" && st_mb) {
        vs_safetensors_pct = DiffPct(*c.value, *st_mb);
        c.corroboration.push_back({{"source", "safetensors"}, {"value_mb", R3(*st_mb)},
                                   {"diff_pct", *vs_safetensors_pct}, {"evidence", st_ev}});
      }
      if (th_mb) {
        vs_theory_pct = DiffPct(*c.value, *th_mb);
        c.corroboration.push_back({{"source", "config_theory"}, {"value_mb", R3(*th_mb)},
                                   {"diff_pct", *vs_theory_pct}, {"note", "theory, reference only"}});
      }
    }
    MarkDecodeError(c, {&vlog, &weights});
    comps.push_back(c);
  }

  // KV cache.
  {
    Component c = Make("kv_cache", have_msprof);
    LogValue lv = LogFieldForRank(vlog, "kv_cache_available_gib", rank_index, tp);
    if (lv.gib) {
      c.value = *lv.gib * 1024.0;
      c.source = "vllm_log";
      c.evidence.push_back(lv.evidence);
      if (vlog.kv_cache_tokens) {
        const auto tok = static_cast<int64_t>(*vlog.kv_cache_tokens);
        c.note = fmt::format("{} tokens", tok);
        json e = LogCiteJson(vlog, "kv_cache_tokens", CiteOf(vlog.run, "kv_cache_tokens"));
        e["value"] = tok;
        c.evidence.push_back(e);
      }
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "no 'Available KV cache memory' line in the vLLM log";
    }
    MarkDecodeError(c, {&vlog});
    comps.push_back(c);
  }

  // Graph capture.
  {
    Component c = Make("graph_capture", have_msprof);
    LogValue lv = LogFieldForRank(vlog, "graph_capture_gib", rank_index, tp);
    if (lv.gib) {
      c.value = *lv.gib * 1024.0;
      c.source = "vllm_log";
      c.evidence.push_back(lv.evidence);
      c.note = fmt::format("max of {} 'Graph capturing finished' line(s)", vlog.graph_capture_count.value_or(0));
    } else {
      c.source = "vllm_log";
      c.status = "not_reported";
      c.note = vlog.present ? "no 'Graph capturing finished' line (eager mode, or not printed)"
                            : "vLLM log unavailable";
    }
    MarkDecodeError(c, {&vlog});
    comps.push_back(c);
  }

  // HCCL, RUNTIME, SLOG.
  for (const auto& [k, comp] : std::vector<std::pair<std::string, std::string>>{
           {"hccl", "HCCL"}, {"runtime", "RUNTIME"}, {"slog", "SLOG"}}) {
    Component c = Make(k, have_msprof);
    auto it = pick.best.find(comp);
    if (it != pick.best.end()) {
      c.value = it->second->max_mb;
      c.source = "msprof_npu_module_mem";
      c.evidence.push_back(MsprofEvidence(*it->second));
      c.note = pick.scope == "device" ? "per-device (PROF dir maps to this device)"
                                      : "process-level (CSV not mapped to a single device)";
    } else {
      c.source = have_msprof ? "msprof_npu_module_mem" : "unavailable";
      c.status = have_msprof ? "not_reported" : "unavailable";
      c.note = have_msprof ? "component absent from npu_module_mem" : "msprof data missing";
    }
    MarkDecodeError(c, {&msprof});
    comps.push_back(c);
  }

  // Other msprof components (> 0.5 MB each).
  {
    Component c = Make("msprof_other", have_msprof);
    if (have_msprof) {
      double sum = 0;
      std::vector<std::string> names;
      for (const auto& [comp, r] : pick.best) {
        if (IsNamedMsprofComponent(comp)) continue;
        if (r->max_mb <= kMsprofOtherMinMb) continue;
        sum += r->max_mb;
        names.push_back(comp);
        c.evidence.push_back(MsprofEvidence(*r));
      }
      c.value = sum;
      c.source = "msprof_npu_module_mem";
      c.note = names.empty() ? "no other component above 0.5 MB"
                             : fmt::format("{} (each > 0.5 MB)", fmt::join(names, " + "));
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "msprof data missing";
    }
    MarkDecodeError(c, {&msprof});
    comps.push_back(c);
  }

  // Activation peak.
  {
    Component c = Make("activation_peak", have_msprof);
    std::optional<double> smi_delta;
    if (used_ready && used_infer) smi_delta = std::max(0.0, *used_infer - *used_ready);
    if (series_ok) {
      c.value = *series->value_mb;
      c.source = "series";
      c.evidence.push_back(SeriesEvidence(*series));
      c.note = fmt::format("max of the npu_mem Device series inside the inference window ({} clock, widened) minus "
                           "the level just before it",
                           series->clock.value_or("?"));
      if (smi_delta)
        c.corroboration.push_back({{"source", "npu_smi_delta"}, {"value_mb", R3(*smi_delta)},
                                   {"diff_mb", R3(*smi_delta - *c.value)},
                                   {"diff_pct", DiffPct(*smi_delta, *c.value)},
                                   {"evidence", json::array({SnapshotEvidence(ready, dev, "after_ready_npu_smi.txt"),
                                                             SnapshotEvidence(infer, dev, "after_infer_npu_smi.txt")})},
                                   {"note", "max(0, after_infer - after_ready); 0 when the allocator gave the "
                                            "activation back before the snapshot"}});
    } else if (smi_delta && !msprof.failed()) {
      c.value = smi_delta;
      c.source = "npu_smi_delta";
      c.evidence.push_back(SnapshotEvidence(ready, dev, "after_ready_npu_smi.txt"));
      c.evidence.push_back(SnapshotEvidence(infer, dev, "after_infer_npu_smi.txt"));
      c.note = "max(0, after_infer - after_ready)";
      if (series) c.note += fmt::format("; the npu_mem series gave none ({}: {})", series->reason, series->message);
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "needs npu-smi after ready and after inference";
    }
    MarkDecodeError(c, {&msprof, &ready, &infer});
    comps.push_back(c);
  }

  // Residual = used - everything above; no figure when any document failed
  // to decode (it would absorb what that document holds).
  double sum = 0;
  for (const auto& c : comps)
    if (c.value) sum += *c.value;
  {
    Component c = Make("residual", have_msprof);
    if (used) {
      c.value = *used - sum;
      c.source = "residual";
      c.status = have_msprof ? "unattributed" : "unattributed_msprof_missing";
      if (series_ok) {
        c.evidence.push_back(SnapshotEvidence(ready, dev, "after_ready_npu_smi.txt"));
        c.evidence.push_back(SeriesEvidence(*series));
      } else {
        c.evidence.push_back(SnapshotEvidence(used_infer ? infer : ready, dev,
                                              used_infer ? "after_infer_npu_smi.txt" : "after_ready_npu_smi.txt"));
      }
      c.note = series_ok ? "HBM at the inference peak (npu-smi after ready + the series' activation peak) minus "
                           "every component above"
               : have_msprof ? "npu-smi used minus every component above"
                             : "msprof data missing: not split further; collect with msprof for a full breakdown";
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "no npu-smi snapshot of the running service";
    }
    for (const InputDoc* d : std::initializer_list<const InputDoc*>{&baseline, &ready, &infer, &vlog, &msprof,
                                                                    &weights, &theory})
      if (d->failed()) {
        c.value.reset();
        c.evidence = json::array();
        break;
      }
    MarkDecodeError(c, {&baseline, &ready, &infer, &vlog, &msprof, &weights, &theory});
    comps.push_back(c);
  }

  json comp_json = json::array();
  for (const auto& c : comps) comp_json.push_back(ComponentJson(c, used));

  // Cross-validation.
  json xv = {{"npu_smi_used_mb", Opt(smi_used)}, {"component_sum_mb", R3(sum)}};
  if (series_ok) xv["inference_peak_used_mb"] = Opt(used);
  const std::optional<double> resid = comps.back().value;
  xv["unattributed_mb"] = Opt(resid);
  xv["unattributed_pct"] = (resid && used && *used > 0) ? json(R3(*resid / *used * 100.0)) : json(nullptr);
  xv["component_sum_within_5pct"] =
      (resid && used && *used > 0) ? json(std::fabs(*resid) / *used <= 0.05) : json(nullptr);
  const auto& w = comps[1];
  const auto& kv = comps[2];
  if (have_msprof) {
    if (const NpuMemRow* app = MsprofAppPeak(msprof, dev)) {
      const double app_mb = *app->max_hbm_mb;
      xv["msprof_app_mb"] = R3(app_mb);
      xv["msprof_app_evidence"] = {{"blob", app->blob}, {"file", "msprof_csvs/" + app->file}, {"row", app->row}};
      if (w.value && kv.value) {
        xv["weights_plus_kv_mb"] = R3(*w.value + *kv.value);
        xv["app_minus_weights_kv_mb"] = R3(app_mb - *w.value - *kv.value);
      }
    } else {
      xv["msprof_app_mb"] = nullptr;
    }
  }
  if (vs_safetensors_pct) xv["weights_vs_safetensors_pct"] = *vs_safetensors_pct;
  if (vs_theory_pct) {
    xv["weights_vs_theory_pct"] = *vs_theory_pct;
    xv["weights_vs_theory_within_5pct"] = std::fabs(*vs_theory_pct) <= 5.0;
  }

  DeviceOut out;
  out.msprof = pick.scope != "none";
  if (w.value && w.source == "vllm_log") out.vllm_weights_mb = R3(*w.value);
  out.report = {{"device_id", dev},
                {"rank", rank_index},
                {"hbm_used_mb", Opt(used)},
                {"hbm_total_mb", Opt(total)},
                {"hbm_used_phase", used_phase},
                {"msprof_scope", pick.scope},
                {"components", comp_json},
                {"cross_validation", xv}};
  return out;
}

json WeightsBreakdown(const WeightsInput& weights, const std::optional<double>& vllm_weights_mb) {
  if (!weights.usable() || !weights.per_device_bytes) return nullptr;
  json cats = json::array();
  for (const auto& c : weights.categories) {
    cats.push_back({{"key", c.category},
                    {"name", c.display_name},
                    {"tensor_count", c.tensor_count},
                    {"total_gib", R3(c.total_bytes / kMiB / 1024.0)},
                    {"per_device_gib", R3(c.per_device_bytes / kMiB / 1024.0)},
                    {"share_pct", R3(c.share_of_per_device * 100.0)},
                    {"dtypes", c.dtypes},
                    {"shard_strategies", c.shard_strategies}});
  }
  const double st_gib = *weights.per_device_bytes / kMiB / 1024.0;
  json out = {{"source", "safetensors_headers"},
              {"blob", weights.blob.value_or("")},
              {"file", weights.file.value_or("weight_manifest.json")},
              {"rule_based_inference", true},
              {"note", "tensor byte sizes are exact (file headers); categories and shard strategies are a "
                       "rule-based inference from tensor names"},
              {"tp", weights.tp.value_or(1)},
              {"dp", weights.dp.value_or(1)},
              {"ep", weights.ep.value_or(1)},
              {"total_gib", R3(weights.total_bytes.value_or(0.0) / kMiB / 1024.0)},
              {"per_device_gib", R3(st_gib)},
              {"categories", cats}};
  // safetensors vs vLLM, from the first device whose weights line is the vLLM log's.
  if (vllm_weights_mb) {
    const double vllm_gib = *vllm_weights_mb / 1024.0;
    out["vllm_per_device_gib"] = R3(vllm_gib);
    out["difference_gib"] = R3(vllm_gib - st_gib);
    out["difference_pct"] = st_gib > 0 ? json(R3((vllm_gib - st_gib) / st_gib * 100.0)) : json(nullptr);
    out["usual_reasons"] = {"MTP layers share the base model's embedding / lm_head (vLLM loads them once)",
                            "F32 parameters (A_log, dt_bias, norms) loaded as BF16",
                            "a vision encoder is loaded even for text-only use",
                            "vLLM's measured delta includes allocator rounding and buffers"};
  }
  return out;
}

}  // namespace

bool IsNamedMsprofComponent(const std::string& component) {
  return component == "HCCL" || component == "RUNTIME" || component == "SLOG" || component == "APP";
}

std::optional<int> RankFromLogPrefix(const std::string& prefix, int tp) {
  if (prefix.empty()) return 0;
  static const std::regex kDpTp(R"(DP(\d+)_TP(\d+))");
  static const std::regex kTp(R"(\bWorker_TP(\d+))");
  static const std::regex kRank(R"(\brank=(\d+))");
  static const std::regex kEngineDp(R"(^EngineCore_(?:DP)?(\d+)\b)");
  static const std::regex kEngine(R"(^EngineCore\b)");
  std::smatch m;
  if (std::regex_search(prefix, m, kDpTp)) return std::stoi(m[1]) * std::max(tp, 1) + std::stoi(m[2]);
  if (std::regex_search(prefix, m, kTp)) return std::stoi(m[1]);
  if (std::regex_search(prefix, m, kRank)) return std::stoi(m[1]);
  if (std::regex_search(prefix, m, kEngineDp)) return std::stoi(m[1]) * std::max(tp, 1);
  if (std::regex_search(prefix, m, kEngine)) return 0;
  return std::nullopt;
}

namespace {

json ErrorsJson(const std::vector<ReportEvidenceError>& errors) {
  json out = json::array();
  for (const auto& e : errors) out.push_back(e.ToJson());
  return out;
}

json NodeReport(const json& raw, const json& operator_memory, const std::string& prefix) {
  const MemoryReportInput ev = DecodeMemoryReportInput(raw, prefix);
  const int tp = static_cast<int>(ev.tp);
  const int rank_offset = static_cast<int>(ev.rank_offset);
  std::vector<int> devices(ev.devices.begin(), ev.devices.end());
  if (devices.empty()) {
    std::set<int> seen;
    for (const SnapshotInput* snap : {&ev.after_infer, &ev.after_ready}) {
      if (!snap->usable() || snap->hbm.empty()) continue;
      for (const auto& [dev, reading] : snap->hbm) seen.insert(static_cast<int>(dev));
      break;
    }
    devices.assign(seen.begin(), seen.end());
  }

  json devs = json::array();
  bool msprof_any = false;
  std::optional<double> vllm_weights_mb;
  for (size_t i = 0; i < devices.size(); ++i) {
    DeviceOut d = DeviceReport(ev, devices[i], rank_offset + static_cast<int>(i), tp);
    if (ev.machine) d.report["machine"] = *ev.machine;
    msprof_any = msprof_any || d.msprof;
    if (!vllm_weights_mb) vllm_weights_mb = d.vllm_weights_mb;
    devs.push_back(std::move(d.report));
  }

  json chain = json::array();
  auto add_chain = [&](const InputDoc& doc, const std::optional<std::string>& file,
                       const std::optional<std::string>& blob, const char* def_file, const char* what) {
    if (!doc.present) return;
    chain.push_back({{"what", what}, {"file", file.value_or(def_file)}, {"blob", blob.value_or("")}});
  };
  add_chain(ev.baseline, ev.baseline.file, ev.baseline.blob, "baseline_npu_smi.txt", "npu-smi phase 0 (baseline)");
  add_chain(ev.after_ready, ev.after_ready.file, ev.after_ready.blob, "after_ready_npu_smi.txt",
            "npu-smi after ready");
  add_chain(ev.after_infer, ev.after_infer.file, ev.after_infer.blob, "after_infer_npu_smi.txt",
            "npu-smi after inference");
  add_chain(ev.vllm_log, ev.vllm_log.file, ev.vllm_log.blob, "vllm_serve.log", "vLLM server log (stdout + stderr)");
  add_chain(ev.weights, ev.weights.file, ev.weights.blob, "weight_manifest.json",
            "safetensors headers -> weight manifest");
  if (ev.msprof.usable()) {
    std::set<std::string> files;
    for (const auto& r : ev.msprof.module_mem)
      if (files.insert(r.file).second)
        chain.push_back({{"what", "msprof npu_module_mem"}, {"file", "msprof_csvs/" + r.file}, {"blob", r.blob}});
    for (const auto& r : ev.msprof.npu_mem)
      if (files.insert(r.file).second)
        chain.push_back({{"what", "msprof npu_mem"}, {"file", "msprof_csvs/" + r.file}, {"blob", r.blob}});
  }

  json notes = json::array();
  notes.push_back("every value comes from a measurement; a missing source is reported as unavailable, never estimated");
  if (!msprof_any)
    notes.push_back("msprof data missing: HCCL / RUNTIME / SLOG are not attributed and stay in the residual");
  if (!ev.baseline.present)
    notes.push_back("no baseline: fixed overhead unavailable (pass --baseline-from RUN|FILE)");
  AddOperatorMemory(operator_memory, devs, notes);  // --operator-memory (operator_memory_report.h)
  const std::string mstatus = !ev.msprof.present    ? "not_collected"
                              : ev.msprof.failed()  ? "evidence_error"
                                                : ev.msprof.status.value_or("unknown");
  if (mstatus == "export_timeout")
    notes.push_back("msprof export timed out: the report uses whatever CSVs existed");
  if (!ev.errors.empty())
    notes.push_back("some evidence failed to decode (evidence_errors): the figures that depend on it are not shown");

  json report = {{"schema_version", 1},
                 {"mode", ev.mode},
                 {"tp", tp},
                 {"dp", static_cast<int>(ev.dp)},
                 {"msprof", {{"status", mstatus}, {"available", msprof_any}}},
                 {"devices", devs},
                 {"weights_breakdown", WeightsBreakdown(ev.weights, vllm_weights_mb)},
                 {"evidence_chain", chain},
                 {"notes", notes}};
  if (!ev.errors.empty()) report["evidence_errors"] = ErrorsJson(ev.errors);
  return report;
}

// The raw document at `key` of an object, else null (what the typed
// decoders and AddOperatorMemory take).
const json& RawDoc(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

}  // namespace

json BuildMemoryReport(const json& ev) {
  const json& others = RawDoc(ev, "nodes");
  if (!others.is_array() || others.empty()) return NodeReport(ev, RawDoc(ev, "operator_memory"), "");
  json head = ev;
  head.erase("nodes");
  const MemoryReportInput head_in = DecodeMemoryReportInput(head);
  std::vector<ReportEvidenceError> errors = head_in.errors;
  json reports = json::array({{{"node", 0},
                               {"machine", head_in.machine.value_or("")},
                               {"report", NodeReport(head, RawDoc(head, "operator_memory"), "")}}});
  for (size_t i = 0; i < others.size(); ++i) {
    const json& n = others[i];
    const std::string prefix = fmt::format("nodes[{}].", i);
    if (!n.is_object()) {
      errors.push_back({fmt::format("nodes[{}]", i), fmt::format("nodes[{}] must be an object", i)});
      continue;
    }
    const EvidenceDoc nd(n, fmt::format("nodes[{}]", i));
    std::optional<int64_t> node;
    std::optional<std::string> machine;
    for (Status st : {nd.Int("node", node), nd.Str("machine", machine)})
      if (!st.ok()) errors.push_back({fmt::format("nodes[{}]", i), st.message()});
    const MemoryReportInput in = DecodeMemoryReportInput(n, prefix);
    errors.insert(errors.end(), in.errors.begin(), in.errors.end());
    reports.push_back({{"node", node.value_or(static_cast<int64_t>(i + 1))},
                       {"machine", machine.value_or("")},
                       {"report", NodeReport(n, RawDoc(n, "operator_memory"), prefix)}});
  }
  json merged = MergeNodeMemoryReports(reports);
  if (merged.is_object()) merged.erase("evidence_errors");
  if (!errors.empty()) merged["evidence_errors"] = ErrorsJson(errors);
  return merged;
}

}  // namespace npuprof::sm
