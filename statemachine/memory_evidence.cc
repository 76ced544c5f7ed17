// DecodeMemoryEvidence and MemoryAdviceInput: see memory_evidence.h.
#include "statemachine/memory_evidence.h"

#include <cmath>

#include <fmt/format.h>

#include "common/json_field.h"
#include "common/json_shape.h"
#include "statemachine/evidence_doc.h"

namespace npuprof::sm {

namespace {

using Doc = EvidenceDoc;

#define NP_TRY(expr) NP_EVIDENCE_TRY(expr)

// The advice's typed evidence from the report's decoded input
// (memory_report_input.h, the one decoder of these documents): a document
// that failed to decode there is absent here, and its error is listed.

NpuSmiEvidence FromSnapshot(const SnapshotInput& in) {
  NpuSmiEvidence out;
  if (!in.usable()) return out;
  out.present = true;
  out.source = in.source.value_or("");
  out.blob = in.blob.value_or("");
  out.file = in.file.value_or("");
  for (const auto& [dev, r] : in.hbm) {
    HbmDeviceSnapshot snap;
    snap.used_mb = r.used_mb;
    snap.total_mb = r.total_mb;
    snap.process_table = r.process_table;
    for (const auto& p : r.processes) snap.processes.push_back({p.pid, p.name, p.memory_mb});
    out.devices[dev] = std::move(snap);
  }
  return out;
}

VllmLogEvidence FromVllmLog(const VllmLogInput& in) {
  VllmLogEvidence out;
  if (!in.usable()) return out;
  out.present = true;
  out.blob = in.blob.value_or("");
  out.file = in.file.value_or("");
  if (out.file.empty()) out.file = "vllm_serve.log";
  out.weights_gib = in.run.weights_gib;
  out.kv_cache_available_gib = in.run.kv_cache_available_gib;
  out.graph_capture_gib = in.run.graph_capture_gib;
  out.gpu_memory_utilization = in.gpu_memory_utilization;
  if (in.kv_cache_tokens && std::isfinite(*in.kv_cache_tokens))
    out.kv_cache_tokens = static_cast<int64_t>(std::llround(*in.kv_cache_tokens));
  out.gpu_blocks = in.gpu_blocks;
  for (const auto& [field, cite] : in.run.evidence) out.lines[field] = {cite.line.value_or(0), cite.text.value_or("")};
  return out;
}

MsprofEvidence FromMsprof(const MsprofInput& in) {
  MsprofEvidence out;
  if (!in.usable()) return out;
  out.status = in.status.value_or("");
  for (const auto& r : in.module_mem) out.module_mem.push_back({r.device_id, r.component, r.file, r.blob, r.max_mb, r.row});
  for (const auto& p : in.activation_peaks) out.activation_peaks.push_back({p.device_id, p.ok, p.value_mb, p.file, p.blob});
  return out;
}

WeightsEvidence FromWeights(const WeightsInput& in) {
  WeightsEvidence out;
  if (!in.usable()) return out;
  out.present = true;
  out.blob = in.blob.value_or("");
  out.file = in.file.value_or("");
  out.per_device_bytes = in.per_device_bytes;
  out.total_bytes = in.total_bytes;
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

Status DecodeComponents(const Doc& in, std::map<int64_t, std::map<std::string, double>>& out) {
  NP_TRY(in.Object("components_mb"));
  if (!in.Has("components_mb")) return Status::Ok();
  const json& all = in.At("components_mb");
  for (auto it = all.begin(); it != all.end(); ++it) {
    const Doc dev(it.value(), "components_mb." + it.key());
    if (!it.value().is_object() || it.key().empty() || it.key().size() > 6 ||
        it.key().find_first_not_of("0123456789") != std::string::npos)
      return Status::Corruption(fmt::format("{} must be a device id holding an object", dev.path()));
    auto& dst = out[std::stoll(it.key())];
    for (auto c = it.value().begin(); c != it.value().end(); ++c) {
      if (!c.value().is_number()) return dev.Wrong(c.key(), "a number");
      dst[c.key()] = c.value().get<double>();
    }
  }
  return Status::Ok();
}

Status DecodeOptText(const Doc& d, const char* key, std::optional<std::string>& out) {
  std::string s;
  NP_TRY(d.Str(key, s));
  if (!s.empty()) out = s;
  return Status::Ok();
}

// The spec's settings; tp, dp and the devices the evidence names win (the
// node's own, as the report reads them).
Result<RunSettings> DecodeSettings(const Doc& d, const Doc& ev, const MemoryReportInput& node) {
  RunSettings out;
  NP_TRY(d.Str("mode", out.mode));
  NP_TRY(d.Str("model", out.model));
  NP_TRY(d.Num("gpu_memory_utilization", out.gpu_memory_utilization));
  std::optional<int64_t> tp, dp;
  NP_TRY(d.Int("tp", tp));
  NP_TRY(d.Int("dp", dp));
  out.tp = ev.Has("tp") ? node.tp : tp.value_or(1);
  out.dp = ev.Has("dp") ? node.dp : dp.value_or(1);
  if (d.Has("nodes") && dp) out.dp = *dp;  // a deployment's dp is over all its nodes
  NP_TRY(d.Int("max_model_len", out.max_model_len));
  NP_TRY(d.Int("max_tokens", out.max_tokens));
  NP_TRY(d.Bool("enforce_eager", out.enforce_eager));
  NP_TRY(d.Bool("enable_expert_parallel", out.enable_expert_parallel));
  NP_TRY(DecodeOptText(d, "compilation_config", out.compilation_config));
  NP_TRY(DecodeOptText(d, "speculative_config", out.speculative_config));
  NP_TRY(DecodeOptText(d, "additional_config", out.additional_config));
  NP_TRY(DecodeOptText(d, "quantization", out.quantization));
  out.multi_node = d.Has("nodes");
  NP_TRY(d.Array("nodes"));
  if (out.multi_node)
    for (size_t i = 0; i < d.At("nodes").size(); ++i) {
      const Doc n(d.At("nodes")[i], fmt::format("{}[{}]", d.PathOf("nodes"), i));
      NP_TRY(n.IsObject());
      NodeSetting node;
      NP_TRY(n.Str("machine", node.machine));
      if (node.machine.empty()) return n.Wrong("machine", "a machine name");
      NP_TRY(n.Ints("devices", node.devices));
      out.nodes.push_back(std::move(node));
    }
  NP_TRY(d.Str("dp_address", out.dp_address));
  NP_TRY(d.Int("dp_rpc_port", out.dp_rpc_port));
  out.devices = node.devices;
  NP_TRY(d.Int("kv_cache_memory", out.kv_cache_memory));
  NP_TRY(d.Object("env"));
  if (d.Has("env"))
    for (auto it = d.At("env").begin(); it != d.At("env").end(); ++it) {
      if (!it.value().is_string()) return d.Sub("env").Wrong(it.key(), "a string");
      out.env[it.key()] = it.value().get<std::string>();
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
  NP_TRY(in.Object("spec"));
  // The evidence documents: the report's decoder, each on its own.
  const Doc ev = in.Sub("evidence");
  const MemoryReportInput node = DecodeMemoryReportInput(ev.raw(), "evidence.");
  out.errors = node.errors;
  if (ev.present() && !ev.raw().is_object())
    out.errors.push_back({"evidence", std::string("evidence must be an object, not ") + JsonTypeWords(ev.raw())});
  auto settings = DecodeSettings(in.Sub("spec"), ev, node);
  if (!settings.ok()) return settings.status();
  out.settings = std::move(*settings);
  NP_TRY(in.Str("run_id", out.settings.run_id));
  NP_TRY(in.Str("machine", out.settings.machine));
  NP_TRY(in.Str("status", out.status));
  if (out.settings.mode.empty()) out.settings.mode = node.mode;
  out.baseline = FromSnapshot(node.baseline);
  out.after_ready = FromSnapshot(node.after_ready);
  out.after_infer = FromSnapshot(node.after_infer);
  out.vllm_log = FromVllmLog(node.vllm_log);
  out.msprof = FromMsprof(node.msprof);
  out.weights = FromWeights(node.weights);
  out.theory = FromWeights(node.theory);
  // The report's component values and the model config: a malformed one is
  // listed and left out, as a document is.
  if (Status st = DecodeComponents(in, out.components_mb); !st.ok()) {
    out.components_mb.clear();
    out.errors.push_back({"components_mb", st.message()});
  }
  auto mc = DecodeModelConfig(in.Sub("model_config"));
  if (mc.ok()) out.model_config = std::move(*mc);
  else out.errors.push_back({"model_config", mc.status().message()});
  return out;
}

json MemoryAdviceInput(const RunState& s, const json& report_evidence, const json& report) {
  json spec = json::object();
  for (const char* f : {"mode", "model", "gpu_memory_utilization", "tp", "dp", "max_model_len", "max_tokens",
                        "enforce_eager", "enable_expert_parallel", "compilation_config", "speculative_config",
                        "additional_config", "quantization", "extra_args", "env", "kv_cache_memory"})
    if (s.spec.contains(f)) spec[f] = s.spec[f];
  // A multi-node run's nodes (machine and devices asked for, head first) and
  // its data-parallel address and port: what its remedy sweep repeats.
  if (s.spec.contains("nodes") && s.spec["nodes"].is_array() && !s.spec["nodes"].empty()) {
    spec["nodes"] = json::array();
    for (const auto& n : s.spec["nodes"]) {
      json node = {{"machine", Field(n, "machine")}};
      if (Field(n, "devices").is_array()) node["devices"] = n["devices"];
      spec["nodes"].push_back(std::move(node));
    }
    for (const char* f : {"dp_address", "dp_rpc_port"})
      if (s.spec.contains(f) && !s.spec[f].is_null()) spec[f] = s.spec[f];
  }
  json in = {{"run_id", s.run_id},
             {"machine", s.machine},
             {"status", RunStatusName(s.terminal ? s.status : RunStatus::kRunning)},
             {"spec", spec},
             {"evidence", report_evidence}};
  // The report's component values per device (what the residual rule reads):
  // the devices of the machine the evidence is of (a multi-node run's head;
  // another node's device 0 is not the head's).
  json comps = json::object();
  const json head = Field(report_evidence, "machine");
  for (const auto& d : ArrField(report, "devices")) {
    const auto id = IntField(d, "device_id");
    if (!id) continue;
    if (head.is_string() && Field(d, "machine").is_string() && Field(d, "machine") != head) continue;
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
