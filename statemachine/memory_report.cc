// BuildMemoryReport: see memory_report.h. Output layout:
// {"schema_version":1, "mode", "tp", "dp", "msprof": {"status","available"},
//  "devices": [{"device_id", "hbm_used_mb", "hbm_total_mb", "hbm_used_phase",
//     "msprof_scope": "device"|"process"|"none",
//     "components": [{"key","label_zh","label_en","value_mb"|null,"value_gib",
//        "percent","source","status","evidence":[...],"corroboration":[...],"note"}],
//     "cross_validation": {...}}],
//  "weights_breakdown": {...}|null, "evidence_chain": [...], "notes": [...]}
#include "statemachine/memory_report.h"
#include "statemachine/operator_memory_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "common/json_field.h"
#include "statemachine/memory_deployment_report.h"

namespace npuprof::sm {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }


std::optional<double> HbmField(const json& snap, const std::string& dev, const char* field) {
  return NumField(Field(Field(snap, "hbm"), dev.c_str()), field);
}

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
  json evidence;  // {"blob","file","line","text","rank"}
};

// The value of `field` for the rank on `rank_index`, else the run-level one.
LogValue LogFieldForRank(const json& vlog, const char* field, std::optional<int> rank_index, int tp) {
  LogValue out;
  const json& summary = Field(vlog, "summary");
  auto mk_ev = [&](const json& ev, const std::string& rank) {
    json e = {{"blob", vlog.value("blob", "")}, {"file", vlog.value("file", "vllm_serve.log")},
              {"field", field}};
    if (ev.is_object()) {
      e["line"] = ev.value("line", 0);
      e["text"] = ev.value("text", "");
    }
    if (!rank.empty()) e["process"] = rank;
    return e;
  };
  if (rank_index) {
    const json& ranks = Field(summary, "ranks");
    if (ranks.is_object()) {
      for (auto it = ranks.begin(); it != ranks.end(); ++it) {
        if (RankFromLogPrefix(it.key(), tp) != rank_index) continue;
        if (auto v = NumField(it.value(), field)) {
          out.gib = v;
          out.evidence = mk_ev(Field(Field(it.value(), "evidence"), field), it.key());
          return out;
        }
      }
    }
  }
  if (auto v = NumField(summary, field)) {
    out.gib = v;
    out.evidence = mk_ev(Field(Field(summary, "evidence"), field), "");
  }
  return out;
}

// ---- msprof -------------------------------------------------------------

struct MsprofPick {
  std::map<std::string, json> best;  // component -> entry with the largest max_mb
  std::string scope = "none";
};

MsprofPick PickMsprof(const json& msprof, int dev) {
  MsprofPick pick;
  const json& rows = Field(msprof, "module_mem");
  if (!rows.is_array()) return pick;
  for (const char* pass : {"device", "process"}) {
    for (const auto& r : rows) {
      const bool has_dev = r.contains("device_id") && r["device_id"].is_number_integer();
      if (std::string(pass) == "device" && !(has_dev && r["device_id"].get<int>() == dev)) continue;
      if (std::string(pass) == "process" && has_dev) continue;
      const std::string comp = r.value("component", "");
      if (comp.empty()) continue;
      auto it = pick.best.find(comp);
      if (it == pick.best.end() || r.value("max_mb", 0.0) > it->second.value("max_mb", 0.0)) pick.best[comp] = r;
    }
    if (!pick.best.empty()) {
      pick.scope = pass;
      break;
    }
  }
  return pick;
}

json MsprofEvidence(const json& r) {
  return {{"blob", r.value("blob", "")},     {"file", "msprof_csvs/" + r.value("file", "")},
          {"row", r.value("row", 0)},        {"component", r.value("component", "")},
          {"raw", r.value("raw", "")},       {"timestamp", r.value("timestamp", "")},
          {"value_mb", R3(r.value("max_mb", 0.0))}, {"prof_dir", r.value("prof_dir", "")}};
}

std::optional<json> MsprofAppPeak(const json& msprof, int dev) {
  const json& rows = Field(msprof, "npu_mem");
  if (!rows.is_array()) return std::nullopt;
  std::optional<json> best;
  for (const auto& r : rows) {
    if (r.value("event", "") != "APP") continue;
    if (!(r.contains("device_id") && r["device_id"].is_number_integer() && r["device_id"].get<int>() == dev)) continue;
    if (!best || r.value("max_hbm_mb", 0.0) > best->value("max_hbm_mb", 0.0)) best = r;
  }
  return best;
}

// The activation peak the collect step measured on this device's npu_mem
// "Device" series (msprof.activation_peaks), if any.
std::optional<json> SeriesPeak(const json& msprof, int dev) {
  const json& rows = Field(msprof, "activation_peaks");
  if (!rows.is_array()) return std::nullopt;
  for (const auto& r : rows)
    if (r.is_object() && r.contains("device_id") && r["device_id"].is_number_integer() &&
        r["device_id"].get<int>() == dev)
      return r;
  return std::nullopt;
}

json SeriesEvidence(const json& p) {
  const json& peak = Field(p, "peak");
  return {{"blob", p.value("blob", "")},
          {"file", "msprof_csvs/" + p.value("file", "")},
          {"event", p.value("event", "Device")},
          {"row", Field(peak, "row").is_number() ? peak["row"] : json(0)},
          {"peak_mb", Opt(NumField(p, "peak_mb"))},
          {"base_mb", Opt(NumField(p, "base_mb"))},
          {"base_rows", p.value("base_rows", json::array())},
          {"window_rows", p.value("window_rows", json::array())},
          {"window", p.value("window", json(nullptr))},
          {"clock", p.value("clock", json(nullptr))},
          {"value_mb", Opt(NumField(p, "value_mb"))}};
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

json SnapshotEvidence(const json& snap, const std::string& dev, const char* fallback_file) {
  return {{"blob", snap.value("blob", "")},
          {"file", snap.value("file", fallback_file)},
          {"device", dev},
          {"field", "used_mb"},
          {"value_mb", Opt(HbmField(snap, dev, "used_mb"))}};
}

// ---- one device ---------------------------------------------------------

json DeviceReport(const json& ev, int dev, int rank_index, int tp) {
  const std::string key = std::to_string(dev);
  const json& baseline = Field(ev, "baseline");
  const json& ready = Field(ev, "after_ready");
  const json& infer = Field(ev, "after_infer");
  const json& vlog = Field(ev, "vllm_log");
  const json& msprof = Field(ev, "msprof");
  const json& weights = Field(ev, "weights");
  const json& theory = Field(ev, "theory");

  const MsprofPick pick = PickMsprof(msprof, dev);
  const bool have_msprof = !pick.best.empty();

  const auto used_ready = HbmField(ready, key, "used_mb");
  const auto used_infer = HbmField(infer, key, "used_mb");
  std::optional<double> total = HbmField(infer, key, "total_mb");
  if (!total) total = HbmField(ready, key, "total_mb");
  if (!total) total = HbmField(baseline, key, "total_mb");
  const std::optional<double> smi_used = used_infer ? used_infer : used_ready;
  std::optional<double> used = smi_used;
  const char* used_phase = used_infer ? "after_infer" : (used_ready ? "after_ready" : "none");
  // The series' peak, when msprof measured one: the HBM the components add
  // up to is then the level at that peak (after ready + the peak).
  const std::optional<json> series = SeriesPeak(msprof, dev);
  const bool series_ok = series && series->value("ok", false) && NumField(*series, "value_mb") && used_ready;
  if (series_ok) {
    used = *used_ready + *NumField(*series, "value_mb");
    used_phase = "inference_peak";
  }

  std::vector<Component> comps;

  // Fixed overhead.
  {
    Component c = Make("fixed_overhead", have_msprof);
    if (auto v = HbmField(baseline, key, "used_mb")) {
      c.value = v;
      const std::string src = baseline.value("source", "npu_smi");
      c.source = src == "npu_smi" ? "npu_smi_baseline" : src;
      json e = SnapshotEvidence(baseline, key, "baseline_npu_smi.txt");
      if (baseline.contains("origin")) e["origin"] = baseline["origin"];
      c.evidence.push_back(e);
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = baseline.is_object() ? "the baseline npu-smi snapshot has no entry for this device"
                                    : "no baseline: attach mode without --baseline-from RUN|FILE";
    }
    comps.push_back(c);
  }

  // Weights: vLLM log > safetensors per-device > unavailable.
  {
    Component c = Make("weights", have_msprof);
    LogValue lv = LogFieldForRank(vlog, "weights_gib", rank_index, tp);
    std::optional<double> st_mb, th_mb;
    if (auto b = NumField(weights, "per_device_bytes")) st_mb = *b / kMiB;
    if (auto b = NumField(theory, "per_device_bytes")) th_mb = *b / kMiB;
    json st_ev = nullptr;
    if (weights.is_object())
      st_ev = {{"blob", weights.value("blob", "")}, {"file", weights.value("file", "weight_manifest.json")},
               {"field", "per_device_bytes"}, {"value", NumField(weights, "per_device_bytes").value_or(0)}};
    if (lv.gib) {
      c.value = *lv.gib * 1024.0;
      c.source = "vllm_log";
      c.evidence.push_back(lv.evidence);
    } else if (st_mb) {
      c.value = st_mb;
      c.source = "safetensors";
      c.evidence.push_back(st_ev);
      c.note = "vLLM log reported no weights; safetensors per-device bytes used (shard rules are a rule-based inference)";
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "neither the vLLM log nor safetensors headers gave the weights";
    }
    if (c.value) {
      if (c.source != "safetensors" && st_mb)
        c.corroboration.push_back({{"source", "safetensors"}, {"value_mb", R3(*st_mb)},
                                   {"diff_pct", DiffPct(*c.value, *st_mb)}, {"evidence", st_ev}});
      if (th_mb)
        c.corroboration.push_back({{"source", "config_theory"}, {"value_mb", R3(*th_mb)},
                                   {"diff_pct", DiffPct(*c.value, *th_mb)}, {"note", "theory, reference only"}});
    }
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
      const json& s = Field(vlog, "summary");
      if (auto tok = NumField(s, "kv_cache_tokens")) {
        c.note = fmt::format("{} tokens", static_cast<int64_t>(*tok));
        json e = {{"blob", vlog.value("blob", "")}, {"file", vlog.value("file", "vllm_serve.log")},
                  {"field", "kv_cache_tokens"}, {"value", static_cast<int64_t>(*tok)}};
        const json& te = Field(Field(s, "evidence"), "kv_cache_tokens");
        if (te.is_object()) {
          e["line"] = te.value("line", 0);
          e["text"] = te.value("text", "");
        }
        c.evidence.push_back(e);
      }
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "no 'Available KV cache memory' line in the vLLM log";
    }
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
      const json& s = Field(vlog, "summary");
      c.note = fmt::format("max of {} 'Graph capturing finished' line(s)", s.value("graph_capture_count", 0));
    } else {
      c.source = "vllm_log";
      c.status = "not_reported";
      c.note = vlog.is_object() ? "no 'Graph capturing finished' line (eager mode, or not printed)"
                                : "vLLM log unavailable";
    }
    comps.push_back(c);
  }

  // HCCL, RUNTIME, SLOG.
  for (const auto& [k, comp] : std::vector<std::pair<std::string, std::string>>{
           {"hccl", "HCCL"}, {"runtime", "RUNTIME"}, {"slog", "SLOG"}}) {
    Component c = Make(k, have_msprof);
    auto it = pick.best.find(comp);
    if (it != pick.best.end()) {
      c.value = it->second.value("max_mb", 0.0);
      c.source = "msprof_npu_module_mem";
      c.evidence.push_back(MsprofEvidence(it->second));
      c.note = pick.scope == "device" ? "per-device (PROF dir maps to this device)"
                                      : "process-level (CSV not mapped to a single device)";
    } else {
      c.source = have_msprof ? "msprof_npu_module_mem" : "unavailable";
      c.status = have_msprof ? "not_reported" : "unavailable";
      c.note = have_msprof ? "component absent from npu_module_mem" : "msprof data missing";
    }
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
        const double v = r.value("max_mb", 0.0);
        if (v <= kMsprofOtherMinMb) continue;
        sum += v;
        names.push_back(comp);
        c.evidence.push_back(MsprofEvidence(r));
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
    comps.push_back(c);
  }

  // Activation peak.
  {
    Component c = Make("activation_peak", have_msprof);
    std::optional<double> smi_delta;
    if (used_ready && used_infer) smi_delta = std::max(0.0, *used_infer - *used_ready);
    if (series_ok) {
      c.value = *NumField(*series, "value_mb");
      c.source = "series";
      c.evidence.push_back(SeriesEvidence(*series));
      c.note = fmt::format("max of the npu_mem Device series inside the inference window ({} clock, widened) minus "
                           "the level just before it",
                           series->value("clock", "?"));
      if (smi_delta)
        c.corroboration.push_back({{"source", "npu_smi_delta"}, {"value_mb", R3(*smi_delta)},
                                   {"diff_mb", R3(*smi_delta - *c.value)},
                                   {"diff_pct", DiffPct(*smi_delta, *c.value)},
                                   {"evidence", json::array({SnapshotEvidence(ready, key, "after_ready_npu_smi.txt"),
                                                             SnapshotEvidence(infer, key, "after_infer_npu_smi.txt")})},
                                   {"note", "max(0, after_infer - after_ready); 0 when the allocator gave the "
                                            "activation back before the snapshot"}});
    } else if (smi_delta) {
      c.value = smi_delta;
      c.source = "npu_smi_delta";
      c.evidence.push_back(SnapshotEvidence(ready, key, "after_ready_npu_smi.txt"));
      c.evidence.push_back(SnapshotEvidence(infer, key, "after_infer_npu_smi.txt"));
      c.note = "max(0, after_infer - after_ready)";
      if (series)
        c.note += fmt::format("; the npu_mem series gave none ({}: {})", series->value("reason", ""),
                              series->value("message", ""));
    } else {
      c.source = "unavailable";
      c.status = "unavailable";
      c.note = "needs npu-smi after ready and after inference";
    }
    comps.push_back(c);
  }

  // Residual = used - everything above.
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
        c.evidence.push_back(SnapshotEvidence(ready, key, "after_ready_npu_smi.txt"));
        c.evidence.push_back(SeriesEvidence(*series));
      } else {
        c.evidence.push_back(SnapshotEvidence(used_infer ? infer : ready, key,
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
    if (auto app = MsprofAppPeak(msprof, dev)) {
      const double app_mb = app->value("max_hbm_mb", 0.0);
      xv["msprof_app_mb"] = R3(app_mb);
      xv["msprof_app_evidence"] = {{"blob", app->value("blob", "")},
                                   {"file", "msprof_csvs/" + app->value("file", "")},
                                   {"row", app->value("row", 0)}};
      if (w.value && kv.value) {
        xv["weights_plus_kv_mb"] = R3(*w.value + *kv.value);
        xv["app_minus_weights_kv_mb"] = R3(app_mb - *w.value - *kv.value);
      }
    } else {
      xv["msprof_app_mb"] = nullptr;
    }
  }
  for (const auto& cor : w.corroboration) {
    const std::string src = cor.value("source", "");
    if (src == "safetensors") xv["weights_vs_safetensors_pct"] = cor["diff_pct"];
    if (src == "config_theory") {
      xv["weights_vs_theory_pct"] = cor["diff_pct"];
      xv["weights_vs_theory_within_5pct"] = std::fabs(cor.value("diff_pct", 0.0)) <= 5.0;
    }
  }

  return {{"device_id", dev},
          {"rank", rank_index},
          {"hbm_used_mb", Opt(used)},
          {"hbm_total_mb", Opt(total)},
          {"hbm_used_phase", used_phase},
          {"msprof_scope", pick.scope},
          {"components", comp_json},
          {"cross_validation", xv}};
}

json WeightsBreakdown(const json& weights, const json& devices) {
  if (!weights.is_object() || !weights.contains("per_device_bytes")) return nullptr;
  json cats = json::array();
  for (const auto& c : Field(weights, "categories")) {
    cats.push_back({{"key", c.value("category", "")},
                    {"name", c.value("display_name", "")},
                    {"tensor_count", c.value("tensor_count", 0)},
                    {"total_gib", R3(c.value("total_bytes", 0.0) / kMiB / 1024.0)},
                    {"per_device_gib", R3(c.value("per_device_bytes", 0.0) / kMiB / 1024.0)},
                    {"share_pct", R3(c.value("share_of_per_device", 0.0) * 100.0)},
                    {"dtypes", c.value("dtypes", json::array())},
                    {"shard_strategies", c.value("shard_strategies", json::array())}});
  }
  json out = {{"source", "safetensors_headers"},
              {"blob", weights.value("blob", "")},
              {"file", weights.value("file", "weight_manifest.json")},
              {"rule_based_inference", true},
              {"note", "tensor byte sizes are exact (file headers); categories and shard strategies are a "
                       "rule-based inference from tensor names"},
              {"tp", weights.value("tp", 1)},
              {"dp", weights.value("dp", 1)},
              {"ep", weights.value("ep", 1)},
              {"total_gib", R3(weights.value("total_bytes", 0.0) / kMiB / 1024.0)},
              {"per_device_gib", R3(weights.value("per_device_bytes", 0.0) / kMiB / 1024.0)},
              {"categories", cats}};
  // safetensors vs vLLM, from the first device's weights line.
  for (const auto& d : devices) {
    for (const auto& c : d["components"]) {
      if (c.value("key", "") != "weights" || c.value("source", "") != "vllm_log" || !c["value_mb"].is_number())
        continue;
      const double vllm_gib = c["value_mb"].get<double>() / 1024.0;
      const double st_gib = weights.value("per_device_bytes", 0.0) / kMiB / 1024.0;
      out["vllm_per_device_gib"] = R3(vllm_gib);
      out["difference_gib"] = R3(vllm_gib - st_gib);
      out["difference_pct"] = st_gib > 0 ? json(R3((vllm_gib - st_gib) / st_gib * 100.0)) : json(nullptr);
      out["usual_reasons"] = {"MTP layers share the base model's embedding / lm_head (vLLM loads them once)",
                              "F32 parameters (A_log, dt_bias, norms) loaded as BF16",
                              "a vision encoder is loaded even for text-only use",
                              "vLLM's measured delta includes allocator rounding and buffers"};
      return out;
    }
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

json NodeReport(const json& ev) {
  const int tp = ev.value("tp", 1);
  const int rank_offset = ev.value("rank_offset", 0);
  const json machine = ev.contains("machine") && ev["machine"].is_string() ? ev["machine"] : json(nullptr);
  const int dp = ev.value("dp", 1);
  std::vector<int> devices;
  if (ev.contains("devices") && ev["devices"].is_array())
    for (const auto& d : ev["devices"])
      if (d.is_number_integer()) devices.push_back(d.get<int>());
  if (devices.empty()) {
    std::set<int> seen;
    for (const char* phase : {"after_infer", "after_ready"}) {
      const json& hbm = Field(Field(ev, phase), "hbm");
      if (!hbm.is_object()) continue;
      for (auto it = hbm.begin(); it != hbm.end(); ++it) seen.insert(std::atoi(it.key().c_str()));
      break;
    }
    devices.assign(seen.begin(), seen.end());
  }

  json devs = json::array();
  for (size_t i = 0; i < devices.size(); ++i) {
    json d = DeviceReport(ev, devices[i], rank_offset + static_cast<int>(i), tp);
    if (!machine.is_null()) d["machine"] = machine;
    devs.push_back(std::move(d));
  }

  const json& msprof = Field(ev, "msprof");
  bool msprof_any = false;
  for (const auto& d : devs) msprof_any = msprof_any || d.value("msprof_scope", "none") != "none";

  json chain = json::array();
  auto add_chain = [&](const char* field, const char* def_file, const char* what) {
    const json& o = Field(ev, field);
    if (!o.is_object()) return;
    chain.push_back({{"what", what}, {"file", o.value("file", def_file)}, {"blob", o.value("blob", "")}});
  };
  add_chain("baseline", "baseline_npu_smi.txt", "npu-smi phase 0 (baseline)");
  add_chain("after_ready", "after_ready_npu_smi.txt", "npu-smi after ready");
  add_chain("after_infer", "after_infer_npu_smi.txt", "npu-smi after inference");
  add_chain("vllm_log", "vllm_serve.log", "vLLM server log (stdout + stderr)");
  add_chain("weights", "weight_manifest.json", "safetensors headers -> weight manifest");
  if (msprof.is_object()) {
    std::set<std::string> files;
    for (const char* part : {"module_mem", "npu_mem"})
      for (const auto& r : Field(msprof, part))
        if (files.insert(r.value("file", "")).second)
          chain.push_back({{"what", fmt::format("msprof {}", part == std::string("module_mem") ? "npu_module_mem"
                                                                                              : "npu_mem")},
                           {"file", "msprof_csvs/" + r.value("file", "")},
                           {"blob", r.value("blob", "")}});
  }

  json notes = json::array();
  notes.push_back("every value comes from a measurement; a missing source is reported as unavailable, never estimated");
  if (!msprof_any)
    notes.push_back("msprof data missing: HCCL / RUNTIME / SLOG are not attributed and stay in the residual");
  if (!Field(ev, "baseline").is_object())
    notes.push_back("no baseline: fixed overhead unavailable (pass --baseline-from RUN|FILE)");
  AddOperatorMemory(Field(ev, "operator_memory"), devs, notes);  // --operator-memory (operator_memory_report.h)
  const std::string mstatus = msprof.is_object() ? msprof.value("status", "unknown") : "not_collected";
  if (mstatus == "export_timeout")
    notes.push_back("msprof export timed out: the report uses whatever CSVs existed");

  return {{"schema_version", 1},
          {"mode", ev.value("mode", "standalone")},
          {"tp", tp},
          {"dp", dp},
          {"msprof", {{"status", mstatus}, {"available", msprof_any}}},
          {"devices", devs},
          {"weights_breakdown", WeightsBreakdown(Field(ev, "weights"), devs)},
          {"evidence_chain", chain},
          {"notes", notes}};
}

}  // namespace

json BuildMemoryReport(const json& ev) {
  const json& others = Field(ev, "nodes");
  if (!others.is_array() || others.empty()) return NodeReport(ev);
  json head = ev;
  head.erase("nodes");
  json reports = json::array({{{"node", 0}, {"machine", ev.value("machine", "")}, {"report", NodeReport(head)}}});
  for (size_t i = 0; i < others.size(); ++i) {
    const json& n = others[i];
    if (!n.is_object()) continue;
    reports.push_back({{"node", n.value("node", static_cast<int64_t>(i + 1))},
                       {"machine", n.value("machine", "")},
                       {"report", NodeReport(n)}});
  }
  return MergeNodeMemoryReports(reports);
}

}  // namespace npuprof::sm
