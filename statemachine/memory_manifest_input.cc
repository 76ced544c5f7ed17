// DecodeMemoryManifestInput: see memory_manifest_input.h.
#include "statemachine/memory_manifest_input.h"

#include <fmt/format.h>

#include "statemachine/evidence_doc.h"

namespace npuprof::sm {

namespace {

using Doc = EvidenceDoc;

// Collects the errors of one decoding pass under a document name.
struct Errors {
  std::vector<ReportEvidenceError>& list;
  void Add(const std::string& document, const Status& st) {
    if (!st.ok()) list.push_back({document, st.message()});
  }
};

// d[key] when it has the shape `ok` checks, else null (an error unless absent).
template <typename Check>
json Typed(const Doc& d, const char* key, const char* want, Check ok, const std::string& document, Errors& e) {
  if (!d.raw().is_object() || !d.raw().contains(key)) return nullptr;
  const json& v = d.At(key);
  if (v.is_null() || ok(v)) return v;
  e.Add(document, d.Wrong(key, want));
  return nullptr;
}

bool IsInts(const json& v) {
  if (!v.is_array()) return false;
  for (const auto& x : v)
    if (!x.is_number_integer()) return false;
  return true;
}

// The first of service[key], spec[key] that is there (JSON null included, as recorded).
json ServiceOrSpec(const Doc& svc, const Doc& spec, const char* key, const char* want, bool (*ok)(const json&),
                   Errors& e) {
  if (svc.raw().is_object() && svc.raw().contains(key)) return Typed(svc, key, want, ok, "service", e);
  return Typed(spec, key, want, ok, "spec", e);
}

std::optional<std::string> BlobOf(const Doc& data, const char* key, const std::string& prefix, Errors& e) {
  const Doc d = data.Sub(key);
  if (!d.raw().is_object()) return std::nullopt;
  std::optional<std::string> blob;
  e.Add(prefix + key, d.Str("blob", blob));
  return blob;
}

json Record(const Doc& data, const char* key, const std::string& prefix, Errors& e) {
  if (!data.Has(key)) return nullptr;
  if (!data.At(key).is_object()) {
    e.Add(prefix + key, data.Wrong(key, "an object"));
    return nullptr;
  }
  return data.At(key);
}

ManifestMsprof DecodeMsprofFiles(const Doc& data, const std::string& prefix, Errors& e) {
  ManifestMsprof out;
  const Doc m = data.Sub("msprof");
  if (!m.raw().is_object()) return out;
  out.present = true;
  const std::string doc = prefix + "msprof";
  if (Status st = m.Object("blobs"); !st.ok()) {
    e.Add(doc, st);
  } else if (m.Has("blobs")) {
    for (auto it = m.At("blobs").begin(); it != m.At("blobs").end(); ++it) {
      if (!it.value().is_string()) {
        e.Add(doc, m.Sub("blobs").Wrong(it.key(), "a string"));
        continue;
      }
      out.blobs[it.key()] = it.value().get<std::string>();
    }
  }
  for (auto [key, dst] : {std::pair<const char*, json*>{"__prof_device_map__", &out.prof_device_map},
                          std::pair<const char*, json*>{"prof_dirs", &out.prof_dirs}}) {
    if (Status st = m.Object(key); !st.ok())
      e.Add(doc, st);
    else if (m.Has(key))
      *dst = m.At(key);
  }
  return out;
}

ManifestNodeInput DecodeNode(const json& data, const std::string& prefix, Errors& e) {
  const Doc d(data.is_object() ? data : Doc::Null(), "");
  ManifestNodeInput n;
  n.baseline = DecodeSnapshotDoc(data, "baseline", prefix, e.list);
  n.after_ready = DecodeSnapshotDoc(data, "after_ready", prefix, e.list);
  n.after_infer = DecodeSnapshotDoc(data, "after_infer", prefix, e.list);
  n.vllm_log_blob = BlobOf(d, "vllm_log", prefix, e);
  n.msprof = DecodeMsprofFiles(d, prefix, e);
  n.service = Record(d, "service", prefix, e);
  n.flushed = Record(d, "flushed", prefix, e);
  n.exported = Record(d, "export", prefix, e);
  return n;
}

bool IsString(const json& v) { return v.is_string(); }
bool IsInt(const json& v) { return v.is_number_integer(); }

}  // namespace

MemoryManifestInput DecodeMemoryManifestInput(const RunState& s, const json& service) {
  MemoryManifestInput out;
  Errors e{out.errors};
  const Doc spec(s.spec.is_object() ? s.spec : Doc::Null(), "spec");
  const Doc svc(service.is_object() ? service : Doc::Null(), "service");
  const Doc data(s.data.is_object() ? s.data : Doc::Null(), "");

  e.Add("spec", spec.Str("mode", out.mode));
  ManifestService& m = out.service;
  const json model = ServiceOrSpec(svc, spec, "model", "a string", IsString, e);
  m.model = model.is_string() ? model.get<std::string>() : "";
  m.served_model_name = ServiceOrSpec(svc, spec, "served_model_name", "a string", IsString, e);
  m.tp = ServiceOrSpec(svc, spec, "tp", "a whole number", IsInt, e);
  m.dp = ServiceOrSpec(svc, spec, "dp", "a whole number", IsInt, e);
  if (!svc.raw().contains("tp") && !spec.raw().contains("tp")) m.tp = 1;
  if (!svc.raw().contains("dp") && !spec.raw().contains("dp")) m.dp = 1;
  m.devices = ServiceOrSpec(svc, spec, "devices", "an array of whole numbers", IsInts, e);
  m.port = ServiceOrSpec(svc, spec, "port", "a whole number", IsInt, e);
  e.Add("service", svc.Strs("extra_args", m.extra_args));
  e.Add("service", svc.Strs("serve_argv", m.serve_argv));
  if (svc.Has("runtime_dir") && svc.At("runtime_dir").is_string()) m.runtime_dir = svc.At("runtime_dir");
  m.wrap_script = Typed(svc, "wrap_script", "a string", IsString, "service", e);

  out.head = DecodeNode(s.data, "", e);
  out.weights_blob = BlobOf(data, "weights", "", e);
  out.model_config_blob = BlobOf(data, "model_config", "", e);
  out.inference_blob = BlobOf(data, "inference", "", e);
  out.operator_memory_blob = BlobOf(data, "operator_memory", "", e);
  out.has_weights = data.raw().is_object() && data.raw().contains("weights");
  out.has_model_config = data.raw().is_object() && data.raw().contains("model_config");
  if (data.Sub("model_config").raw().is_object()) {
    const Doc mc = data.Sub("model_config");
    out.model_config_content = Typed(mc, "content", "an object", [](const json& v) { return v.is_object(); },
                                     "model_config", e);
  }
  out.inference = Record(data, "inference", "", e);
  out.stop_escalated = data.Has("stop_escalated") ? data.At("stop_escalated") : json(nullptr);
  if (data.Has("step_failures")) out.step_failures = Record(data, "step_failures", "", e);
  if (spec.Has("baseline_npu_smi_text") && spec.At("baseline_npu_smi_text").is_string())
    out.baseline_npu_smi_text = spec.At("baseline_npu_smi_text").get<std::string>();

  // A deployment over several machines: node i's documents under node_evidence["i"].
  if (data.Has("node_evidence") && data.At("node_evidence").is_object() && spec.Has("nodes")) {
    out.has_nodes = true;
    const json& spec_nodes = spec.At("nodes");
    const Doc ne_all = data.Sub("node_evidence");
    for (size_t i = 1; spec_nodes.is_array() && i < spec_nodes.size(); ++i) {
      std::string machine;
      const Doc sn(spec_nodes[i], fmt::format("spec.nodes[{}]", i));
      if (spec_nodes[i].is_object()) e.Add("spec", sn.Str("machine", machine));
      const std::string key = std::to_string(i);
      const json& ne = ne_all.Has(key) ? ne_all.At(key.c_str()) : Doc::Null();
      out.nodes.emplace_back(machine, DecodeNode(ne, fmt::format("node_evidence.{}.", i), e));
    }
  }
  return out;
}

}  // namespace npuprof::sm
