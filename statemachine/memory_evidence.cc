// DecodeMemoryEvidence and MemoryAdviceInput: see memory_evidence.h.
#include "statemachine/memory_evidence.h"

#include <fmt/format.h>

#include "common/json_field.h"
#include "common/json_shape.h"
#include "statemachine/evidence_doc.h"

namespace npuprof::sm {

namespace {

using Doc = EvidenceDoc;

#define NP_TRY(expr) NP_EVIDENCE_TRY(expr)

Result<NpuSmiEvidence> DecodeSnapshot(const Doc& d) {
  NpuSmiEvidence out;
  if (d.raw().is_null()) return out;
  if (!d.raw().is_object()) return Status::Corruption(fmt::format("{} must be an object", d.path()));
  out.present = true;
  NP_TRY(d.Str("source", out.source));
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Str("file", out.file));
  NP_TRY(d.Object("hbm"));
  const Doc hbm = d.Sub("hbm");
  if (!hbm.raw().is_object()) return out;
  for (auto it = hbm.raw().begin(); it != hbm.raw().end(); ++it) {
    const std::string& key = it.key();
    if (key.empty() || key.size() > 6 || key.find_first_not_of("0123456789") != std::string::npos)
      return Status::Corruption(fmt::format("{}: key '{}' is not a device id", hbm.path(), key));
    const Doc dev(it.value(), hbm.PathOf(key));
    if (!it.value().is_object()) return Status::Corruption(fmt::format("{} must be an object", dev.path()));
    HbmDeviceSnapshot snap;
    NP_TRY(dev.Num("used_mb", snap.used_mb));
    NP_TRY(dev.Num("total_mb", snap.total_mb));
    NP_TRY(dev.Array("processes"));
    if (dev.Has("processes")) {
      snap.process_table = true;
      size_t i = 0;
      for (const auto& p : dev.At("processes")) {
        const Doc pd(p, dev.PathOf(fmt::format("processes[{}]", i++)));
        if (!p.is_object()) return Status::Corruption(fmt::format("{} must be an object", pd.path()));
        NpuProcessSeen proc;
        std::optional<int64_t> pid, mem;
        NP_TRY(pd.Int("pid", pid));
        NP_TRY(pd.Int("memory_mb", mem));
        NP_TRY(pd.Str("name", proc.name));
        if (!pid) return Status::Corruption(fmt::format("{}.pid is missing", pd.path()));
        proc.pid = *pid;
        proc.memory_mb = mem.value_or(0);
        snap.processes.push_back(std::move(proc));
      }
    }
    out.devices[std::stoll(key)] = std::move(snap);
  }
  return out;
}

Result<VllmLogEvidence> DecodeVllmLog(const Doc& d) {
  VllmLogEvidence out;
  if (d.raw().is_null()) return out;
  if (!d.raw().is_object()) return Status::Corruption(fmt::format("{} must be an object", d.path()));
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Str("file", out.file));
  if (out.file.empty()) out.file = "vllm_serve.log";
  NP_TRY(d.Object("summary"));
  const Doc s = d.Sub("summary");
  if (!s.raw().is_object()) return out;
  out.present = true;
  NP_TRY(s.Num("weights_gib", out.weights_gib));
  NP_TRY(s.Num("kv_cache_available_gib", out.kv_cache_available_gib));
  NP_TRY(s.Num("graph_capture_gib", out.graph_capture_gib));
  NP_TRY(s.Num("gpu_memory_utilization", out.gpu_memory_utilization));
  NP_TRY(s.Int("kv_cache_tokens", out.kv_cache_tokens));
  NP_TRY(s.Int("gpu_blocks", out.gpu_blocks));
  NP_TRY(s.Object("evidence"));
  const Doc ev = s.Sub("evidence");
  if (ev.raw().is_object()) {
    for (auto it = ev.raw().begin(); it != ev.raw().end(); ++it) {
      const Doc line(it.value(), ev.PathOf(it.key()));
      if (!it.value().is_object()) return Status::Corruption(fmt::format("{} must be an object", line.path()));
      LogLine l;
      std::optional<int64_t> n;
      NP_TRY(line.Int("line", n));
      NP_TRY(line.Str("text", l.text));
      l.line = n.value_or(0);
      out.lines[it.key()] = std::move(l);
    }
  }
  return out;
}

Result<MsprofEvidence> DecodeMsprof(const Doc& d) {
  MsprofEvidence out;
  if (d.raw().is_null()) return out;
  if (!d.raw().is_object()) return Status::Corruption(fmt::format("{} must be an object", d.path()));
  NP_TRY(d.Str("status", out.status));
  NP_TRY(d.Array("module_mem"));
  NP_TRY(d.Array("activation_peaks"));
  if (d.Has("module_mem")) {
    size_t i = 0;
    for (const auto& r : d.At("module_mem")) {
      const Doc rd(r, d.PathOf(fmt::format("module_mem[{}]", i++)));
      if (!r.is_object()) return Status::Corruption(fmt::format("{} must be an object", rd.path()));
      MsprofComponentMax m;
      std::optional<double> max;
      std::optional<int64_t> row;
      NP_TRY(rd.Int("device_id", m.device_id));
      NP_TRY(rd.Str("component", m.component));
      NP_TRY(rd.Str("file", m.file));
      NP_TRY(rd.Str("blob", m.blob));
      NP_TRY(rd.Num("max_mb", max));
      NP_TRY(rd.Int("row", row));
      if (m.component.empty() || !max) continue;  // a row that names no component or value attributes nothing
      m.max_mb = *max;
      m.row = row.value_or(0);
      out.module_mem.push_back(std::move(m));
    }
  }
  if (d.Has("activation_peaks")) {
    size_t i = 0;
    for (const auto& r : d.At("activation_peaks")) {
      const Doc rd(r, d.PathOf(fmt::format("activation_peaks[{}]", i++)));
      if (!r.is_object()) return Status::Corruption(fmt::format("{} must be an object", rd.path()));
      ActivationPeakEvidence a;
      std::optional<int64_t> dev;
      NP_TRY(rd.Int("device_id", dev));
      NP_TRY(rd.Bool("ok", a.ok));
      NP_TRY(rd.Num("value_mb", a.value_mb));
      NP_TRY(rd.Str("file", a.file));
      NP_TRY(rd.Str("blob", a.blob));
      if (!dev) continue;
      a.device_id = *dev;
      out.activation_peaks.push_back(std::move(a));
    }
  }
  return out;
}

Result<WeightsEvidence> DecodeWeights(const Doc& d) {
  WeightsEvidence out;
  if (d.raw().is_null()) return out;
  if (!d.raw().is_object()) return Status::Corruption(fmt::format("{} must be an object", d.path()));
  out.present = true;
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Str("file", out.file));
  NP_TRY(d.Num("per_device_bytes", out.per_device_bytes));
  NP_TRY(d.Num("total_bytes", out.total_bytes));
  return out;
}

Result<ModelConfigEvidence> DecodeModelConfig(const Doc& d) {
  ModelConfigEvidence out;
  if (d.raw().is_null()) return out;
  if (!d.raw().is_object()) return Status::Corruption(fmt::format("{} must be an object", d.path()));
  NP_TRY(d.Str("blob", out.blob));
  NP_TRY(d.Object("content"));
  const Doc top = d.Sub("content");
  if (!top.raw().is_object()) return out;
  // A multimodal config keeps the language model's sizes under text_config.
  const bool text = top.Has("text_config") && top.At("text_config").is_object() && !top.Has("num_hidden_layers");
  const Doc c = text ? top.Sub("text_config") : top;
  out.present = true;
  NP_TRY(c.Int("num_hidden_layers", out.num_hidden_layers));
  NP_TRY(c.Int("num_attention_heads", out.num_attention_heads));
  NP_TRY(c.Int("num_key_value_heads", out.num_key_value_heads));
  NP_TRY(c.Int("head_dim", out.head_dim));
  NP_TRY(c.Int("hidden_size", out.hidden_size));
  NP_TRY(c.Int("kv_lora_rank", out.kv_lora_rank));
  NP_TRY(c.Int("qk_rope_head_dim", out.qk_rope_head_dim));
  NP_TRY(c.Str("torch_dtype", out.torch_dtype));
  NP_TRY(c.Array("layer_types"));
  if (c.Has("layer_types")) {
    int64_t n = 0;
    for (const auto& t : c.At("layer_types"))
      if (t.is_string() && t.get<std::string>() == "full_attention") ++n;
    out.full_attention_layers = n;
  }
  return out;
}

Status DecodeOptText(const Doc& d, const char* key, std::optional<std::string>& out) {
  std::string s;
  NP_TRY(d.Str(key, s));
  if (!s.empty()) out = s;
  return Status::Ok();
}

Result<RunSettings> DecodeSettings(const Doc& d, const Doc& ev) {
  RunSettings out;
  NP_TRY(d.Str("mode", out.mode));
  NP_TRY(d.Str("model", out.model));
  NP_TRY(d.Num("gpu_memory_utilization", out.gpu_memory_utilization));
  std::optional<int64_t> tp, dp;
  NP_TRY(ev.Int("tp", tp));
  NP_TRY(ev.Int("dp", dp));
  if (!tp) NP_TRY(d.Int("tp", tp));
  if (!dp) NP_TRY(d.Int("dp", dp));
  out.tp = tp.value_or(1);
  out.dp = dp.value_or(1);
  NP_TRY(d.Int("max_model_len", out.max_model_len));
  NP_TRY(d.Int("max_tokens", out.max_tokens));
  NP_TRY(d.Bool("enforce_eager", out.enforce_eager));
  NP_TRY(d.Bool("enable_expert_parallel", out.enable_expert_parallel));
  NP_TRY(DecodeOptText(d, "compilation_config", out.compilation_config));
  NP_TRY(DecodeOptText(d, "speculative_config", out.speculative_config));
  NP_TRY(DecodeOptText(d, "additional_config", out.additional_config));
  NP_TRY(DecodeOptText(d, "quantization", out.quantization));
  out.multi_node = d.Has("nodes");
  NP_TRY(ev.Array("devices"));
  if (ev.Has("devices"))
    for (const auto& x : ev.At("devices")) {
      if (!x.is_number_integer()) return Status::Corruption("evidence.devices must hold device ids (whole numbers)");
      out.devices.push_back(x.get<int64_t>());
    }
  NP_TRY(d.Array("extra_args"));
  if (d.Has("extra_args"))
    for (const auto& x : d.At("extra_args")) {
      if (!x.is_string()) return Status::Corruption("spec.extra_args must hold strings");
      out.extra_args.push_back(x.get<std::string>());
    }
  return out;
}

}  // namespace

json EvidenceRef::ToJson() const {
  json j = {{"blob", blob}, {"file", file}, {"field", field}};
  if (line) j["line"] = *line;
  if (device) j["device"] = *device;
  if (row) j["row"] = *row;
  if (!text.empty()) j["text"] = text;
  if (value) j["value"] = *value;
  return j;
}

EvidenceRef NpuSmiEvidence::Ref(int64_t device, const char* field, std::optional<double> value) const {
  EvidenceRef r;
  r.blob = blob;
  r.file = file;
  r.field = field;
  r.device = device;
  r.value = value;
  return r;
}

EvidenceRef VllmLogEvidence::Ref(const std::string& field, std::optional<double> value) const {
  EvidenceRef r;
  r.blob = blob;
  r.file = file;
  r.field = field;
  r.value = value;
  if (auto it = lines.find(field); it != lines.end()) {
    r.line = it->second.line;
    r.text = it->second.text;
  }
  return r;
}

const MsprofComponentMax* MsprofEvidence::Max(const std::string& component, int64_t device) const {
  const MsprofComponentMax* best = nullptr;
  for (bool device_pass : {true, false}) {
    for (const auto& m : module_mem) {
      if (m.component != component) continue;
      if (device_pass ? m.device_id != device : m.device_id.has_value()) continue;
      if (!best || m.max_mb > best->max_mb) best = &m;
    }
    if (best) return best;
  }
  return nullptr;
}

Result<MemoryEvidence> DecodeMemoryEvidence(const json& input) {
  if (!input.is_object()) return Status::Corruption("the advice input must be an object");
  const Doc in(input, "");
  MemoryEvidence out;
  NP_TRY(in.Object("evidence"));
  NP_TRY(in.Object("spec"));
  const Doc ev = in.Sub("evidence");
  auto settings = DecodeSettings(in.Sub("spec"), ev);
  if (!settings.ok()) return settings.status();
  out.settings = std::move(*settings);
  NP_TRY(in.Str("run_id", out.settings.run_id));
  NP_TRY(in.Str("machine", out.settings.machine));
  NP_TRY(in.Str("status", out.status));
  if (out.settings.mode.empty()) NP_TRY(ev.Str("mode", out.settings.mode));
  const std::pair<const char*, NpuSmiEvidence*> snaps[] = {
      {"baseline", &out.baseline}, {"after_ready", &out.after_ready}, {"after_infer", &out.after_infer}};
  for (const auto& [key, dst] : snaps) {
    auto s = DecodeSnapshot(ev.Sub(key));
    if (!s.ok()) return s.status();
    *dst = std::move(*s);
  }
  auto log = DecodeVllmLog(ev.Sub("vllm_log"));
  if (!log.ok()) return log.status();
  out.vllm_log = std::move(*log);
  auto ms = DecodeMsprof(ev.Sub("msprof"));
  if (!ms.ok()) return ms.status();
  out.msprof = std::move(*ms);
  auto w = DecodeWeights(ev.Sub("weights"));
  if (!w.ok()) return w.status();
  out.weights = std::move(*w);
  auto th = DecodeWeights(ev.Sub("theory"));
  if (!th.ok()) return th.status();
  out.theory = std::move(*th);
  NP_TRY(in.Object("components_mb"));
  if (in.Has("components_mb"))
    for (auto it = input["components_mb"].begin(); it != input["components_mb"].end(); ++it) {
      const Doc dev(it.value(), "components_mb." + it.key());
      if (!it.value().is_object() || it.key().empty() || it.key().size() > 6 ||
          it.key().find_first_not_of("0123456789") != std::string::npos)
        return Status::Corruption(fmt::format("{} must be a device id holding an object", dev.path()));
      auto& dst = out.components_mb[std::stoll(it.key())];
      for (auto c = it.value().begin(); c != it.value().end(); ++c) {
        if (!c.value().is_number()) return dev.Wrong(c.key(), "a number");
        dst[c.key()] = c.value().get<double>();
      }
    }
  auto mc = DecodeModelConfig(in.Sub("model_config"));
  if (!mc.ok()) return mc.status();
  out.model_config = std::move(*mc);
  return out;
}

json MemoryAdviceInput(const RunState& s, const json& report_evidence, const json& report) {
  json spec = json::object();
  for (const char* f : {"mode", "model", "gpu_memory_utilization", "tp", "dp", "max_model_len", "max_tokens",
                        "enforce_eager", "enable_expert_parallel", "compilation_config", "speculative_config",
                        "additional_config", "quantization", "extra_args"})
    if (s.spec.contains(f)) spec[f] = s.spec[f];
  if (s.spec.contains("nodes") && s.spec["nodes"].is_array() && !s.spec["nodes"].empty())
    spec["nodes"] = s.spec["nodes"].size();
  json in = {{"run_id", s.run_id},
             {"machine", s.machine},
             {"status", RunStatusName(s.terminal ? s.status : RunStatus::kRunning)},
             {"spec", spec},
             {"evidence", report_evidence}};
  // The report's component values per device (what the residual rule reads).
  json comps = json::object();
  for (const auto& d : ArrField(report, "devices")) {
    const auto id = IntField(d, "device_id");
    if (!id) continue;
    json c = json::object();
    for (const auto& x : ArrField(d, "components"))
      if (Field(x, "value_mb").is_number()) c[StrField(x, "key")] = x["value_mb"];
    comps[std::to_string(*id)] = c;
  }
  in["components_mb"] = comps;
  if (s.data.contains("model_config")) in["model_config"] = s.data["model_config"];
  return in;
}

}  // namespace npuprof::sm
