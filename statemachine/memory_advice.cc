// The advice rules: see memory_advice.h and docs/ADVISE.md.
#include "statemachine/memory_advice.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace npuprof::sm {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr int64_t kGiB = int64_t{1} << 30;

double R2(double v) { return std::round(v * 100.0) / 100.0; }
double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

// The first device of the run (its rank 0 prints the run-level KV line).
std::optional<int64_t> FirstDevice(const MemoryEvidence& e) {
  if (!e.settings.devices.empty()) return e.settings.devices.front();
  for (const auto* snap : {&e.after_infer, &e.after_ready, &e.baseline})
    if (!snap->devices.empty()) return snap->devices.begin()->first;
  return std::nullopt;
}

std::optional<double> TotalMb(const MemoryEvidence& e, int64_t dev) {
  for (const auto* snap : {&e.after_infer, &e.after_ready, &e.baseline}) {
    auto it = snap->devices.find(dev);
    if (it != snap->devices.end() && it->second.total_mb) return it->second.total_mb;
  }
  return std::nullopt;
}

std::optional<double> UsedMb(const NpuSmiEvidence& snap, int64_t dev) {
  auto it = snap.devices.find(dev);
  return it == snap.devices.end() ? std::nullopt : it->second.used_mb;
}

std::optional<double> Utilization(const MemoryEvidence& e) {
  if (e.settings.gpu_memory_utilization) return e.settings.gpu_memory_utilization;
  return e.vllm_log.gpu_memory_utilization;
}

// "0,1,2": a device list as the command line takes it.
std::string DeviceListText(const std::vector<int64_t>& devices) {
  std::string out;
  for (auto d : devices) out += (out.empty() ? "" : ",") + std::to_string(d);
  return out;
}

// `npuprof submit sweep` over one grid key testing a remedy ("KEY=VALUE"),
// with the advice it verifies; every other setting of the run is given as
// it ran: a multi-node run's points span the same nodes (--node, head
// first, with the NPUs its spec asked for there). Empty when the run is not
// a standalone profile.
std::vector<std::string> SweepArgs(const MemoryEvidence& e, const std::string& grid, const json& advice,
                                   const std::string& verify_id) {
  const RunSettings& s = e.settings;
  if (s.mode != "standalone" || s.model.empty() || s.machine.empty()) return {};
  if (s.multi_node && s.nodes.empty()) return {};
  const std::string key = grid.substr(0, grid.find('='));
  std::vector<std::string> a = {"submit", "sweep", "--kind", "memory-profile"};
  if (s.multi_node) {
    for (const auto& n : s.nodes)
      a.insert(a.end(), {"--node", n.devices.empty() ? n.machine : n.machine + ":" + DeviceListText(n.devices)});
    if (s.dp_address) a.insert(a.end(), {"--dp-address", *s.dp_address});
    if (s.dp_rpc_port) a.insert(a.end(), {"--dp-rpc-port", std::to_string(*s.dp_rpc_port)});
  } else {
    a.insert(a.end(), {"--machine", s.machine});
  }
  a.insert(a.end(), {"--model", s.model, "--tp", std::to_string(s.tp), "--dp", std::to_string(s.dp)});
  if (key != "gpu-memory-utilization" && s.gpu_memory_utilization)
    a.insert(a.end(), {"--gpu-memory-utilization", fmt::format("{}", *s.gpu_memory_utilization)});
  if (key != "kv-cache-memory" && s.kv_cache_memory)
    a.insert(a.end(), {"--kv-cache-memory", std::to_string(*s.kv_cache_memory)});
  for (const auto& [name, value] : s.env)
    if (key != "env." + name) a.insert(a.end(), {"--env", name + "=" + value});
  if (!s.multi_node && !s.devices.empty()) a.insert(a.end(), {"--devices", DeviceListText(s.devices)});
  if (s.max_model_len) a.insert(a.end(), {"--max-model-len", std::to_string(*s.max_model_len)});
  if (s.max_tokens) a.insert(a.end(), {"--max-tokens", std::to_string(*s.max_tokens)});
  if (s.enforce_eager) a.push_back("--enforce-eager");
  if (s.enable_expert_parallel) a.push_back("--enable-expert-parallel");
  if (s.compilation_config) a.insert(a.end(), {"--compilation-config", *s.compilation_config});
  if (s.speculative_config) a.insert(a.end(), {"--speculative-config", *s.speculative_config});
  if (s.additional_config) a.insert(a.end(), {"--additional-config", *s.additional_config});
  if (s.quantization) a.insert(a.end(), {"--quantization", *s.quantization});
  a.insert(a.end(), {"--grid", grid, "--run-id", verify_id, "--advice", advice.dump()});
  if (!s.extra_args.empty()) {
    a.push_back("--");
    a.insert(a.end(), s.extra_args.begin(), s.extra_args.end());
  }
  return a;
}

// The KV prediction at utilization `to`, from the KV vLLM measured at `from`:
// vLLM's budget is total x utilization minus what is used at its profiling
// peak, so the KV moves by exactly (to - from) x total.
struct KvPrediction {
  double kv_mb = 0;         // before vLLM's 0.01 GiB floor
  int64_t kv_centi = 0;     // as vLLM prints it (GiB x 100)
  std::optional<int64_t> tokens;
};

KvPrediction PredictKv(double kv_gib_now, double from, double to, double total_mb, std::optional<int64_t> bpt) {
  KvPrediction p;
  p.kv_mb = kv_gib_now * 1024.0 + (to - from) * total_mb;
  p.kv_centi = static_cast<int64_t>(std::floor(p.kv_mb / 1024.0 * 100.0 + 1e-9));
  if (bpt && *bpt > 0 && p.kv_centi > 0) p.tokens = KvTokensOf(p.kv_centi, *bpt);
  return p;
}

// Bytes per token: the model config's, else what the run measured (its KV
// GiB over its KV tokens). source names which.
std::optional<int64_t> BytesPerToken(const MemoryEvidence& e, std::string* source) {
  if (auto b = KvBytesPerToken(e.model_config, e.settings.tp)) {
    *source = "model_config";
    return b;
  }
  const auto& log = e.vllm_log;
  if (log.kv_cache_tokens && *log.kv_cache_tokens > 0 && log.kv_cache_available_gib && *log.kv_cache_available_gib > 0) {
    *source = "measured_kv_over_tokens";
    return static_cast<int64_t>(std::llround(*log.kv_cache_available_gib * static_cast<double>(kGiB) /
                                              static_cast<double>(*log.kv_cache_tokens)));
  }
  return std::nullopt;
}

json PredictedJson(const KvPrediction& p) {
  json j = {{"kv_cache_gib", static_cast<double>(p.kv_centi) / 100.0},
            {"kv_cache_mb", R3(static_cast<double>(p.kv_centi) * 1024.0 / 100.0)}};
  j["kv_tokens"] = p.tokens ? json(*p.tokens) : json(nullptr);
  return j;
}

}  // namespace

json AdviceFinding::ToJson() const {
  json ev = json::array();
  for (const auto& r : evidence) ev.push_back(r.ToJson());
  json sug = {{"flags", suggestion.flags}, {"predicted", suggestion.predicted}};
  if (!suggestion.basis.empty()) sug["basis"] = suggestion.basis;
  if (!suggestion.note.empty()) sug["note"] = suggestion.note;
  if (!suggestion.alternatives.empty()) sug["alternatives"] = suggestion.alternatives;
  sug["sweep_args"] = suggestion.sweep_args.empty() ? json(nullptr) : json(suggestion.sweep_args);
  sug["verify_run_id"] = suggestion.verify_run_id.empty() ? json(nullptr) : json(suggestion.verify_run_id);
  return {{"rule", rule},   {"severity", severity},        {"explanation", explanation},
          {"cause", cause}, {"cause_detail", cause_detail}, {"evidence", ev},
          {"suggestion", sug}};
}

double FloorCenti(double x) { return std::floor(x * 100.0 + 1e-6) / 100.0; }

std::optional<int64_t> KvBytesPerToken(const ModelConfigEvidence& c, int64_t tp) {
  if (!c.present || !c.num_hidden_layers || *c.num_hidden_layers <= 0) return std::nullopt;
  int64_t layers = *c.num_hidden_layers;
  if (c.full_attention_layers && *c.full_attention_layers > 0) layers = *c.full_attention_layers;
  const int64_t dtype_bytes = (c.torch_dtype == "float32") ? 4 : 2;
  if (c.kv_lora_rank && *c.kv_lora_rank > 0)
    return (*c.kv_lora_rank + c.qk_rope_head_dim.value_or(64)) * layers * dtype_bytes;
  const int64_t heads = c.num_attention_heads.value_or(0);
  const int64_t kv_heads = c.num_key_value_heads.value_or(heads);
  int64_t head_dim = c.head_dim.value_or(0);
  if (head_dim <= 0 && heads > 0 && c.hidden_size) head_dim = *c.hidden_size / heads;
  if (kv_heads <= 0 || head_dim <= 0) return std::nullopt;
  return 2 * layers * std::max<int64_t>(1, kv_heads / std::max<int64_t>(1, tp)) * head_dim * dtype_bytes;
}

int64_t KvTokensOf(int64_t kv_centi_gib, int64_t bytes_per_token) {
  if (kv_centi_gib <= 0 || bytes_per_token <= 0) return 0;
  const int64_t bytes = kv_centi_gib * kGiB / 100;
  return bytes / (kKvBlockSize * bytes_per_token) * kKvBlockSize;
}

double LargestSafeUtilization(double total_mb, double graph_mb) {
  if (total_mb <= 0) return 0;
  return std::min(kMaxSafeUtilization, FloorCenti((total_mb - graph_mb - kSafetyHeadroomMb) / total_mb));
}

std::string AdviceVerifyRunId(const std::string& run_id, const std::string& rule) {
  const std::string suffix = "-adv-" + (rule == "kv_cache_low" ? std::string("kv") : rule.substr(0, 4));
  constexpr size_t kMax = 58;  // a sweep id (sweep_machine.h kMaxSweepIdLength)
  return run_id.substr(0, std::min(run_id.size(), kMax - suffix.size())) + suffix;
}

// ---- kv_cache_low ----------------------------------------------------------

std::vector<AdviceFinding> RuleKvCacheLow(const MemoryEvidence& e) {
  const auto& log = e.vllm_log;
  const auto dev = FirstDevice(e);
  const auto util = Utilization(e);
  if (!log.kv_cache_available_gib || !dev) return {};
  const double kv_gib = *log.kv_cache_available_gib;
  const bool short_of_len =
      log.kv_cache_tokens && e.settings.max_model_len && *log.kv_cache_tokens < *e.settings.max_model_len;
  if (kv_gib >= kKvLowGib && !short_of_len) return {};

  AdviceFinding f;
  f.rule = "kv_cache_low";
  f.severity = kv_gib <= 0 ? "critical" : "warning";
  f.evidence.push_back(log.Ref("kv_cache_available_gib", kv_gib));
  if (log.kv_cache_tokens) f.evidence.push_back(log.Ref("kv_cache_tokens", static_cast<double>(*log.kv_cache_tokens)));
  const auto total = TotalMb(e, *dev);

  // The cause: HBM other processes held at baseline on the run's devices,
  // HBM held with no process listed, graph capture over its share, else the
  // utilization's budget against the measured non-KV components.
  json procs = json::array();
  double procs_mb = 0;
  std::optional<int64_t> unlisted_dev;
  double unlisted_mb = 0;
  for (int64_t d : e.settings.devices.empty() ? std::vector<int64_t>{*dev} : e.settings.devices) {
    auto it = e.baseline.devices.find(d);
    if (it == e.baseline.devices.end()) continue;
    for (const auto& p : it->second.processes) {
      procs.push_back({{"device", d}, {"pid", p.pid}, {"name", p.name}, {"memory_mb", p.memory_mb}});
      procs_mb = std::max(procs_mb, static_cast<double>(p.memory_mb));
    }
    if (!it->second.processes.empty()) {
      EvidenceRef r = e.baseline.Ref(d, "used_mb", it->second.used_mb);
      for (const auto& p : it->second.processes)
        r.text += fmt::format("{}process pid {} {} {} MB", r.text.empty() ? "" : "; ", p.pid, p.name, p.memory_mb);
      f.evidence.push_back(std::move(r));
    } else if (it->second.used_mb && *it->second.used_mb >= kBaselineUnlistedMb && !unlisted_dev) {
      unlisted_dev = d;
      unlisted_mb = *it->second.used_mb;
      f.evidence.push_back(e.baseline.Ref(d, "used_mb", it->second.used_mb));
    }
  }
  const double graph_mb = log.graph_capture_gib ? *log.graph_capture_gib * 1024.0 : 0.0;
  const double kv_mb = kv_gib * 1024.0;
  if (!procs.empty()) {
    f.cause = "other_process_hbm";
    std::string pids;
    for (const auto& p : procs)
      pids += fmt::format("{}pid {} ({} MB on device {})", pids.empty() ? "" : ", ", p["pid"].get<int64_t>(),
                          p["memory_mb"].get<int64_t>(), p["device"].get<int64_t>());
    f.cause_detail = {{"processes", procs}};
    f.explanation = fmt::format("KV cache {:.2f} GiB: HBM another process held before the service started is "
                                "counted in vLLM's budget: {}",
                                kv_gib, pids);
  } else if (unlisted_dev) {
    f.cause = "baseline_hbm_unlisted";
    f.cause_detail = {{"device", *unlisted_dev}, {"baseline_used_mb", unlisted_mb}};
    f.explanation = fmt::format("KV cache {:.2f} GiB: device {} already used {:.0f} MB before the service with no "
                                "process listed (another container?), and vLLM counts it in its budget",
                                kv_gib, *unlisted_dev, unlisted_mb);
  } else if (log.graph_capture_gib && kv_mb > 0 && graph_mb > kv_mb) {
    f.cause = "graph_capture";
    f.cause_detail = {{"graph_capture_mb", R3(graph_mb)}, {"kv_cache_mb", R3(kv_mb)}};
    f.evidence.push_back(log.Ref("graph_capture_gib", *log.graph_capture_gib));
    f.explanation = fmt::format("KV cache {:.2f} GiB is smaller than the graph capture ({:.2f} GiB), which vLLM "
                                "does not budget",
                                kv_gib, *log.graph_capture_gib);
  } else {
    f.cause = "utilization_budget";
    json d = json::object();
    if (util) d["gpu_memory_utilization"] = *util;
    if (total && util) d["budget_mb"] = R3(*total * *util);
    if (log.weights_gib) {
      d["weights_mb"] = R3(*log.weights_gib * 1024.0);
      f.evidence.push_back(log.Ref("weights_gib", *log.weights_gib));
    }
    f.cause_detail = d;
    f.explanation = fmt::format("KV cache {:.2f} GiB: gpu-memory-utilization {} leaves too little beside the "
                                "measured non-KV components",
                                kv_gib, util ? fmt::format("{}", *util) : std::string("(not recorded)"));
  }
  if (short_of_len && kv_gib >= kKvLowGib)
    f.explanation += fmt::format(" (KV tokens {} < max-model-len {})", *log.kv_cache_tokens, *e.settings.max_model_len);

  // The remedy: the largest safe utilization and the KV it buys.
  if (!total || !util) {
    f.suggestion.note = "no HBM total or utilization recorded: no prediction";
    return {f};
  }
  f.evidence.push_back(e.baseline.present ? e.baseline.Ref(*dev, "total_mb", total)
                                          : e.after_ready.Ref(*dev, "total_mb", total));
  const bool graph_measured = log.graph_capture_gib.has_value() || e.settings.enforce_eager;
  const double graph_reserve = graph_measured ? graph_mb : kGraphAllowanceMb;
  const double safe = LargestSafeUtilization(*total, graph_reserve);
  std::string bpt_source;
  const auto bpt = BytesPerToken(e, &bpt_source);
  f.suggestion.basis = {{"device", *dev},
                        {"total_mb", *total},
                        {"gpu_memory_utilization", *util},
                        {"kv_cache_gib_measured", kv_gib},
                        {"graph_capture_mb", R3(graph_reserve)},
                        {"graph_capture", graph_measured ? "measured" : "allowance (vLLM stopped before capturing)"},
                        {"safety_headroom_mb", kSafetyHeadroomMb},
                        {"block_size", kKvBlockSize},
                        {"bytes_per_token", bpt ? json(*bpt) : json(nullptr)},
                        {"bytes_per_token_source", bpt ? json(bpt_source) : json(nullptr)}};
  if (safe <= *util + 1e-9) {
    f.suggestion.note = fmt::format(
        "gpu-memory-utilization {} is already at the largest safe value ({}): free the HBM held outside the "
        "service{}",
        *util, safe, procs.empty() ? "" : " (the processes above)");
    if (procs_mb > 0) {
      const KvPrediction p = PredictKv(kv_gib + procs_mb / 1024.0, *util, *util, *total, bpt);
      f.suggestion.predicted = PredictedJson(p);
    }
    return {f};
  }
  if (e.settings.kv_cache_memory) {
    f.suggestion.note = fmt::format("the KV cache is fixed by --kv-cache-memory {} bytes, which vLLM takes instead of "
                                    "the utilization's budget: give it a larger value, or drop it",
                                    *e.settings.kv_cache_memory);
    return {f};
  }
  const KvPrediction p = PredictKv(kv_gib, *util, safe, *total, bpt);
  f.suggestion.flags = {{"gpu_memory_utilization", safe}};
  f.suggestion.predicted = PredictedJson(p);
  f.suggestion.predicted["hbm_at_inference_peak_mb"] = R3(*total * safe + graph_reserve);
  f.suggestion.note = fmt::format("the largest gpu-memory-utilization that keeps {:.0f} MB free at the inference "
                                  "peak: KV cache {:.2f} -> {:.2f} GiB",
                                  kSafetyHeadroomMb, kv_gib, static_cast<double>(p.kv_centi) / 100.0);
  // The same KV cache as a fixed size: vLLM's --kv-cache-memory takes it in bytes.
  if (p.kv_centi > 0) {
    const int64_t bytes = p.kv_centi * kGiB / 100;
    json alt_pred = PredictedJson(p);
    alt_pred["kv_cache_mb"] = R3(static_cast<double>(bytes) / kMiB);
    f.suggestion.alternatives.push_back(
        {{"flags", {{"kv_cache_memory", bytes}}},
         {"predicted", alt_pred},
         {"note", "the same KV cache as a fixed size (vLLM's --kv-cache-memory, bytes per device): it no longer "
                  "follows the utilization, nor what else holds HBM at start-up"}});
  }
  f.suggestion.verify_run_id = AdviceVerifyRunId(e.settings.run_id, f.rule);
  const json advice = {{"run_id", e.settings.run_id}, {"rule", f.rule},
                       {"device", *dev},              {"flags", f.suggestion.flags},
                       {"predicted", f.suggestion.predicted}};
  f.suggestion.sweep_args =
      SweepArgs(e, fmt::format("gpu-memory-utilization={}", safe), advice, f.suggestion.verify_run_id);
  if (f.suggestion.sweep_args.empty()) f.suggestion.verify_run_id.clear();
  return {f};
}

// ---- activation_headroom ---------------------------------------------------

std::vector<AdviceFinding> RuleActivationHeadroom(const MemoryEvidence& e) {
  std::vector<AdviceFinding> out;
  const auto util = Utilization(e);
  for (const auto& [dev, ready] : e.after_ready.devices) {
    if (!ready.used_mb || !ready.total_mb) continue;
    std::optional<double> act;
    EvidenceRef act_ref;
    for (const auto& a : e.msprof.activation_peaks)
      if (a.device_id == dev && a.ok && a.value_mb) {
        act = a.value_mb;
        act_ref = EvidenceRef{a.blob, "msprof_csvs/" + a.file, "activation_peak_mb", {}, dev, {}, "", a.value_mb};
      }
    if (!act) {
      const auto infer = UsedMb(e.after_infer, dev);
      if (!infer) continue;
      act = std::max(0.0, *infer - *ready.used_mb);
      act_ref = e.after_infer.Ref(dev, "used_mb", infer);
    }
    const double peak = *ready.used_mb + *act;
    const double headroom = *ready.total_mb - peak;
    const double need = std::max(*act, kMinHeadroomMb);
    if (headroom >= need) continue;
    AdviceFinding f;
    f.rule = "activation_headroom";
    f.severity = headroom < 0 ? "critical" : "warning";
    f.cause = *act > kMinHeadroomMb ? "activation_peak" : "little_free_hbm";
    f.cause_detail = {{"device", dev}, {"headroom_mb", R3(headroom)}, {"activation_peak_mb", R3(*act)},
                      {"hbm_at_peak_mb", R3(peak)}, {"hbm_total_mb", *ready.total_mb}};
    f.explanation = fmt::format("device {}: {:.0f} MB free at the inference peak against an activation peak of "
                                "{:.0f} MB: a larger batch under load risks an out-of-memory error",
                                dev, headroom, *act);
    f.evidence.push_back(e.after_ready.Ref(dev, "used_mb", ready.used_mb));
    f.evidence.push_back(act_ref);
    if (util) {
      const double lower = FloorCenti(*util - (need - headroom) / *ready.total_mb);
      if (lower > 0 && lower < *util) {
        f.suggestion.flags = {{"gpu_memory_utilization", lower}};
        f.suggestion.predicted = {{"headroom_mb", R3(headroom + (*util - lower) * *ready.total_mb)}};
        std::string src;
        const auto bpt = BytesPerToken(e, &src);
        if (e.vllm_log.kv_cache_available_gib) {
          const KvPrediction p = PredictKv(*e.vllm_log.kv_cache_available_gib, *util, lower, *ready.total_mb, bpt);
          f.suggestion.predicted.update(PredictedJson(p));
        }
        f.suggestion.basis = {{"device", dev}, {"gpu_memory_utilization", *util}, {"needed_headroom_mb", R3(need)}};
        f.suggestion.note = "lower gpu-memory-utilization until one more activation peak fits";
        f.suggestion.verify_run_id = AdviceVerifyRunId(e.settings.run_id, f.rule);
        const json advice = {{"run_id", e.settings.run_id}, {"rule", f.rule}, {"device", dev},
                             {"flags", f.suggestion.flags}, {"predicted", f.suggestion.predicted}};
        f.suggestion.sweep_args =
            SweepArgs(e, fmt::format("gpu-memory-utilization={}", lower), advice, f.suggestion.verify_run_id);
        if (f.suggestion.sweep_args.empty()) f.suggestion.verify_run_id.clear();
      }
    }
    out.push_back(std::move(f));
  }
  return out;
}

// ---- weights_vs_safetensors ------------------------------------------------

std::vector<AdviceFinding> RuleWeightsVsSafetensors(const MemoryEvidence& e) {
  const auto& log = e.vllm_log;
  if (!log.weights_gib || !e.weights.per_device_bytes || *e.weights.per_device_bytes <= 0) return {};
  const double vllm_mb = *log.weights_gib * 1024.0;
  const double st_mb = *e.weights.per_device_bytes / kMiB;
  const double pct = (vllm_mb - st_mb) / st_mb * 100.0;
  if (std::fabs(pct) <= kWeightsOffPct) return {};
  AdviceFinding f;
  f.rule = "weights_vs_safetensors";
  f.severity = "info";
  f.cause = pct < 0 ? "loaded_less_than_files" : "loaded_more_than_files";
  f.cause_detail = {{"vllm_weights_mb", R3(vllm_mb)}, {"safetensors_per_device_mb", R3(st_mb)}, {"diff_pct", R2(pct)}};
  f.explanation =
      pct < 0 ? fmt::format("vLLM loaded {:.0f} MB per device, {:.1f} % less than the safetensors files give: shared "
                            "embeddings (MTP / tied lm_head) or F32 tensors loaded as BF16",
                            vllm_mb, -pct)
              : fmt::format("vLLM loaded {:.0f} MB per device, {:.1f} % more than the safetensors files give: a "
                            "vision tower loaded in text mode, a dtype cast up, or workspace counted with weights",
                            vllm_mb, pct);
  f.evidence.push_back(log.Ref("weights_gib", *log.weights_gib));
  EvidenceRef w{e.weights.blob, e.weights.file, "per_device_bytes", {}, {}, {}, "", e.weights.per_device_bytes};
  f.evidence.push_back(w);
  f.suggestion.note = "no configuration change tests this: compare the weight manifest's categories "
                      "(npuprof report RUN --format text) with the model's architecture";
  return {f};
}

// ---- residual_large ----------------------------------------------------------

std::vector<AdviceFinding> RuleResidualLarge(const MemoryEvidence& e) {
  std::vector<AdviceFinding> out;
  if (e.msprof.module_mem.empty()) return out;  // without msprof the residual holds HCCL / RUNTIME too
  for (const auto& [dev, comps] : e.components_mb) {
    auto it = comps.find("residual");
    if (it == comps.end() || it->second <= kResidualMb) continue;
    AdviceFinding f;
    f.rule = "residual_large";
    f.severity = "warning";
    f.cause = "unattributed_hbm";
    f.cause_detail = {{"device", dev}, {"residual_mb", R3(it->second)}};
    f.explanation = fmt::format("device {}: {:.0f} MB of HBM is not attributed to any component although msprof "
                                "ran (threshold {:.0f} MB)",
                                dev, it->second, kResidualMb);
    f.evidence.push_back((e.after_infer.present ? e.after_infer : e.after_ready)
                             .Ref(dev, "used_mb", UsedMb(e.after_infer.present ? e.after_infer : e.after_ready, dev)));
    f.suggestion.note = "no configuration change tests this: look for allocations outside torch (custom ops, "
                        "a second process on the device) in the msprof npu_module_mem table";
    out.push_back(std::move(f));
  }
  return out;
}

// ---- hccl_buffers_large -------------------------------------------------------

std::optional<int64_t> HcclBuffsizeMb(const RunSettings& s, bool* is_default) {
  auto it = s.env.find("HCCL_BUFFSIZE");
  *is_default = it == s.env.end() || it->second.empty();
  if (*is_default) return kHcclDefaultBuffsizeMb;
  const std::string& v = it->second;
  if (v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int64_t mb = std::stoll(v);
  return mb > 0 ? std::optional<int64_t>(mb) : std::nullopt;
}

int64_t SuggestedHcclBuffsizeMb(int64_t current_mb) {
  if (current_mb > kHcclDefaultBuffsizeMb) return kHcclDefaultBuffsizeMb;
  return std::max(kHcclMinBuffsizeMb, current_mb / 2);
}

std::vector<AdviceFinding> RuleHcclBuffersLarge(const MemoryEvidence& e) {
  bool is_default = true;
  const auto size = HcclBuffsizeMb(e.settings, &is_default);
  if (!size) return {};  // a setting HCCL would refuse: nothing to predict from
  // The device whose HCCL buffers take the most (the run-wide setting is what changes).
  const MsprofComponentMax* worst = nullptr;
  double worst_total = 0;
  int64_t worst_dev = 0;
  std::vector<int64_t> devices = e.settings.devices;
  if (devices.empty())
    for (const auto& [d, _] : e.components_mb) devices.push_back(d);
  for (int64_t d : devices) {
    const MsprofComponentMax* m = e.msprof.Max("HCCL", d);
    const auto total = TotalMb(e, d);
    if (!m || !total) continue;
    if (!worst || m->max_mb > worst->max_mb) {
      worst = m;
      worst_total = *total;
      worst_dev = d;
    }
  }
  if (!worst) return {};
  const double hccl_mb = worst->max_mb;
  const auto buffers = static_cast<int64_t>(std::floor(hccl_mb / static_cast<double>(*size) + 1e-9));
  if (buffers < 1) return {};
  const double buffers_mb = static_cast<double>(buffers * *size);
  const double share = buffers_mb / worst_total * 100.0;
  if (share <= kHcclBuffersPctOfHbm) return {};

  AdviceFinding f;
  f.rule = "hccl_buffers_large";
  f.severity = "warning";
  f.cause = is_default ? "hccl_default_buffsize" : "hccl_buffsize_setting";
  f.cause_detail = {{"device", worst_dev},
                    {"hccl_mb", R3(hccl_mb)},
                    {"hccl_buffsize_mb", *size},
                    {"hccl_buffsize_source", is_default ? "default (HCCL_BUFFSIZE unset)" : "env HCCL_BUFFSIZE"},
                    {"buffers", buffers},
                    {"buffers_mb", buffers_mb},
                    {"hccl_fixed_mb", R3(hccl_mb - buffers_mb)},
                    {"share_of_hbm_pct", R2(share)}};
  f.explanation = fmt::format("device {}: HCCL holds {:.0f} MB, {} buffers of HCCL_BUFFSIZE {} MB{} ({:.1f} % of the "
                              "device's HBM, threshold {:.0f} %): HBM the KV cache could use",
                              worst_dev, hccl_mb, buffers, *size, is_default ? " (the default)" : "", share,
                              kHcclBuffersPctOfHbm);
  EvidenceRef ref{worst->blob, "msprof_csvs/" + worst->file, "hccl_mb", {}, worst_dev, worst->row, "", hccl_mb};
  f.evidence.push_back(ref);
  f.evidence.push_back((e.after_ready.present ? e.after_ready : e.baseline).Ref(worst_dev, "total_mb", worst_total));

  const int64_t to = SuggestedHcclBuffsizeMb(*size);
  if (to >= *size) {
    f.suggestion.note = "HCCL_BUFFSIZE is already at its floor: fewer communication domains (a smaller tp/dp) free more";
    return {f};
  }
  const double freed = static_cast<double>(buffers * (*size - to));
  f.suggestion.flags = {{"env", {{"HCCL_BUFFSIZE", std::to_string(to)}}}};
  f.suggestion.predicted = {{"hccl_mb", R3(hccl_mb - freed)}, {"hccl_freed_mb", R3(freed)}};
  f.suggestion.basis = {{"device", worst_dev},
                        {"hccl_mb_measured", R3(hccl_mb)},
                        {"hccl_buffsize_mb", *size},
                        {"buffers", buffers},
                        {"model", "hccl_mb = fixed + buffers x HCCL_BUFFSIZE; buffers = floor(hccl_mb / HCCL_BUFFSIZE)"}};
  std::string note = fmt::format("HCCL_BUFFSIZE {} -> {} MB frees {} x {} MB = {:.0f} MB per device", *size, to,
                                 buffers, *size - to, freed);
  if (e.settings.kv_cache_memory) {
    note += "; the KV cache is fixed by --kv-cache-memory, so the HBM stays free";
  } else if (e.vllm_log.kv_cache_available_gib) {
    // vLLM counts HCCL's HBM as non-torch memory at its profiling peak: the KV cache gets what it frees.
    const auto util = Utilization(e);
    std::string src;
    const auto bpt = BytesPerToken(e, &src);
    const double kv_gib = *e.vllm_log.kv_cache_available_gib;
    const KvPrediction p = PredictKv(kv_gib + freed / 1024.0, 0, 0, 0, bpt);
    f.suggestion.predicted.update(PredictedJson(p));
    f.suggestion.basis["kv_cache_gib_measured"] = kv_gib;
    f.suggestion.basis["bytes_per_token"] = bpt ? json(*bpt) : json(nullptr);
    if (util) f.suggestion.basis["gpu_memory_utilization"] = *util;
    note += fmt::format(", which vLLM's budget gives to the KV cache: {:.2f} -> {:.2f} GiB", kv_gib,
                        static_cast<double>(p.kv_centi) / 100.0);
    f.evidence.push_back(e.vllm_log.Ref("kv_cache_available_gib", kv_gib));
  }
  f.suggestion.note = note + " (large collectives may slow down: compare the sweep's throughput)";
  f.suggestion.verify_run_id = AdviceVerifyRunId(e.settings.run_id, f.rule);
  const json advice = {{"run_id", e.settings.run_id}, {"rule", f.rule},
                       {"device", worst_dev},         {"flags", f.suggestion.flags},
                       {"predicted", f.suggestion.predicted}};
  f.suggestion.sweep_args =
      SweepArgs(e, fmt::format("env.HCCL_BUFFSIZE={}", to), advice, f.suggestion.verify_run_id);
  if (f.suggestion.sweep_args.empty()) f.suggestion.verify_run_id.clear();
  return {f};
}

json BuildMemoryAdvice(const json& input) {
  json doc = {{"schema_version", 1}, {"run_id", input.is_object() ? input.value("run_id", "") : ""}};
  auto ev = DecodeMemoryEvidence(input);
  if (!ev.ok()) {
    doc["status"] = "unreadable";
    doc["error"] = ev.status().message();
    doc["findings"] = json::array();
    return doc;
  }
  json findings = json::array();
  if (!ev->errors.empty()) {
    json errors = json::array();
    for (const auto& err : ev->errors) errors.push_back(err.ToJson());
    doc["evidence_errors"] = std::move(errors);
  }
  for (auto rule : {RuleKvCacheLow, RuleActivationHeadroom, RuleHcclBuffersLarge, RuleWeightsVsSafetensors,
                    RuleResidualLarge})
    for (const auto& f : rule(*ev)) findings.push_back(f.ToJson());
  doc["status"] = ev->errors.empty() ? "ok" : "partial";
  doc["findings"] = std::move(findings);
  return doc;
}

}  // namespace npuprof::sm
