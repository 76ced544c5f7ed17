// BuildMemoryManifest: see memory_manifest.h. Everything the manifest reads
// of the run is decoded once (memory_manifest_input.h); records it archives
// verbatim (the service, msprof's flush and export, the inference answer)
// are copied as they were recorded.
#include "statemachine/memory_manifest.h"

#include "common/time_util.h"
#include "statemachine/evidence_doc.h"
#include "statemachine/memory_manifest_input.h"

namespace npuprof::sm {

namespace {

json Num(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// {"<dev>": {"used_mb","total_mb"}} of a snapshot, null when there is none
// (or it failed to decode: see "evidence_errors").
json HbmOf(const SnapshotInput& snap) {
  if (!snap.usable()) return nullptr;
  json out = json::object();
  for (const auto& [dev, r] : snap.hbm)
    out[std::to_string(dev)] = {{"used_mb", Num(r.used_mb)}, {"total_mb", Num(r.total_mb)}};
  return out;
}

void AddFile(json& files, const std::string& name, const std::optional<std::string>& blob) {
  if (blob && !blob->empty()) files[name] = *blob;
}

void AddNodeFiles(json& files, const std::string& dir, const ManifestNodeInput& n) {
  AddFile(files, dir + "baseline_npu_smi.txt", n.baseline.blob);
  AddFile(files, dir + "after_ready_npu_smi.txt", n.after_ready.blob);
  AddFile(files, dir + "after_infer_npu_smi.txt", n.after_infer.blob);
  AddFile(files, dir + "vllm_serve.log", n.vllm_log_blob);
}

}  // namespace

json BuildMemoryManifest(const RunState& s, const json& summary, const json& report, const json& service) {
  const MemoryManifestInput in = DecodeMemoryManifestInput(s, service);
  const ManifestService& svc = in.service;
  const ManifestNodeInput& head = in.head;
  json m = json::object();
  m["schema_version"] = 1;
  m["run_id"] = s.run_id;
  m["kind"] = s.kind;
  m["tag"] = s.tag;
  m["machine"] = s.machine;
  m["mode"] = in.mode;
  m["status"] = RunStatusName(s.terminal ? s.status : RunStatus::kRunning);
  m["state"] = s.state;
  m["error"] = s.error.empty() ? json(nullptr) : json(s.error);
  m["started_at"] = IsoTimeMs(s.created_ms);
  if (s.terminal) m[s.status == RunStatus::kOk ? "completed_at" : "failed_at"] = IsoTimeMs(s.finished_ms);
  m["model"] = svc.model;
  m["served_model_name"] = svc.served_model_name;
  m["tp"] = svc.tp;
  m["dp"] = svc.dp;
  m["devices"] = svc.devices;
  m["port"] = svc.port;
  m["serve_args"] = svc.extra_args;
  // The argv that ran, as the launch read it back from the target's launch
  // record (what _serve.sh runs); `npuprof verify` checks its managed values
  // against the spec.
  m["serve_argv"] = svc.serve_argv;
  m["launch_record"] = svc.runtime_dir ? json(*svc.runtime_dir + "/launch.json") : json(nullptr);
  // The spec's own settings, as validated (memory_profile_spec.h), verbatim.
  for (const char* f : {"gpu_memory_utilization", "max_model_len", "enable_expert_parallel", "enforce_eager",
                        "speculative_config", "compilation_config", "additional_config", "quantization",
                        "max_tokens", "image_url", "msprof_mem_freq", "attach_run", "baseline_run", "env",
                        "kv_cache_memory"})
    if (s.spec.contains(f)) m[f] = s.spec[f];
  m["service"] = service.empty() ? json(nullptr) : service;
  m["wrap_script"] = svc.wrap_script;

  m["baseline_hbm"] = HbmOf(head.baseline);
  m["baseline_source"] = head.baseline.present ? json(head.baseline.source.value_or("")) : json(nullptr);
  m["after_ready_hbm"] = HbmOf(head.after_ready);
  m["after_infer_hbm"] = HbmOf(head.after_infer);

  json files = json::object();
  AddNodeFiles(files, "", head);
  AddFile(files, "weight_manifest.json", in.weights_blob);
  AddFile(files, "model_config.json", in.model_config_blob);
  AddFile(files, "inference_response.json", in.inference_blob);
  AddFile(files, "operator_memory_digest.json", in.operator_memory_blob);

  json csvs = nullptr;
  if (head.msprof.present) {
    csvs = json::object();
    for (const auto& [name, sha] : head.msprof.blobs) {
      files[name] = sha;
      const std::string local = name.rfind("msprof_csvs/", 0) == 0 ? name.substr(12) : name;
      csvs[local] = name;
    }
    csvs["__prof_device_map__"] = head.msprof.prof_device_map;
    m["msprof_prof_dirs"] = head.msprof.prof_dirs;
  }
  m["msprof_csvs"] = csvs;
  // The report is our own output (BuildMemoryReport): its msprof status is a string.
  std::string msprof_status;
  if (!EvidenceDoc(report, "report").Sub("msprof").Str("status", msprof_status).ok()) msprof_status.clear();
  m["msprof_status"] = msprof_status;
  // How the wait for msprof's flush ended (signal, waited_ms, flush_timed_out).
  m["msprof_flush"] = head.flushed;
  m["msprof_export"] = head.exported;
  m["model_config"] = in.model_config_content;
  m["weight_manifest"] = in.has_weights ? json("weight_manifest.json") : json(nullptr);
  m["inference"] = in.inference;
  m["step_failures"] = in.step_failures;
  m["stop_escalated"] = in.stop_escalated;
  m["files"] = files;
  // A baseline given as a saved npu-smi file travels in the spec, not a blob.
  if (in.baseline_npu_smi_text && !files.contains("baseline_npu_smi.txt"))
    m["baseline_npu_smi_text"] = *in.baseline_npu_smi_text;
  // A deployment over several machines: every other node's snapshots, flush
  // and export, its files under nodes/<machine>/ (the head's are the ones above).
  if (in.has_nodes) {
    json nodes = json::array();
    for (size_t i = 0; i < in.nodes.size(); ++i) {
      const auto& [machine, ne] = in.nodes[i];
      const std::string dir = "nodes/" + machine + "/";
      AddNodeFiles(files, dir, ne);
      for (const auto& [name, sha] : ne.msprof.blobs) files[dir + name] = sha;
      nodes.push_back({{"node", i + 1},
                       {"machine", machine},
                       {"baseline_hbm", HbmOf(ne.baseline)},
                       {"after_ready_hbm", HbmOf(ne.after_ready)},
                       {"after_infer_hbm", HbmOf(ne.after_infer)},
                       {"service", ne.service},
                       {"msprof_flush", ne.flushed},
                       {"msprof_export", ne.exported},
                       {"files_dir", dir}});
    }
    m["nodes"] = nodes;
    m["files"] = files;
  }
  if (!in.errors.empty()) {
    json errors = json::array();
    for (const auto& e : in.errors) errors.push_back(e.ToJson());
    m["evidence_errors"] = errors;
  }
  m["summary"] = summary;
  m["report"] = report;
  return m;
}

}  // namespace npuprof::sm
