#include "statemachine/memory_manifest.h"

#include "common/time_util.h"

namespace npuprof::sm {

namespace {

json HbmOf(const json& data, const char* phase) {
  if (!data.contains(phase) || !data[phase].is_object()) return nullptr;
  json out = json::object();
  const json hbm = data[phase].value("hbm", json::object());
  for (const auto& [dev, v] : hbm.items())
    out[dev] = {{"used_mb", v.value("used_mb", json(nullptr))}, {"total_mb", v.value("total_mb", json(nullptr))}};
  return out;
}

void AddFile(json& files, const std::string& name, const json& holder) {
  if (!holder.is_object()) return;
  const std::string blob = holder.value("blob", "");
  if (!blob.empty()) files[name] = blob;
}

}  // namespace

json BuildMemoryManifest(const RunState& s, const json& summary, const json& report, const json& service) {
  const json& d = s.data;
  json m = json::object();
  m["schema_version"] = 1;
  m["run_id"] = s.run_id;
  m["kind"] = s.kind;
  m["tag"] = s.tag;
  m["machine"] = s.machine;
  m["mode"] = s.spec.value("mode", "standalone");
  m["status"] = RunStatusName(s.terminal ? s.status : RunStatus::kRunning);
  m["state"] = s.state;
  m["error"] = s.error.empty() ? json(nullptr) : json(s.error);
  m["started_at"] = IsoTimeMs(s.created_ms);
  if (s.terminal) m[s.status == RunStatus::kOk ? "completed_at" : "failed_at"] = IsoTimeMs(s.finished_ms);
  m["model"] = service.value("model", s.spec.value("model", ""));
  m["served_model_name"] = service.value("served_model_name", s.spec.value("served_model_name", json(nullptr)));
  m["tp"] = service.value("tp", s.spec.value("tp", 1));
  m["dp"] = service.value("dp", s.spec.value("dp", 1));
  m["devices"] = service.value("devices", s.spec.value("devices", json(nullptr)));
  m["port"] = service.value("port", s.spec.value("port", json(nullptr)));
  m["serve_args"] = service.value("extra_args", json::array());
  // The argv that ran, as the launch read it back from the target's launch
  // record (what _serve.sh runs); `npuprof verify` checks its managed values
  // against the spec.
  m["serve_argv"] = service.value("serve_argv", json::array());
  m["launch_record"] = service.contains("runtime_dir") && service["runtime_dir"].is_string()
                           ? json(service["runtime_dir"].get<std::string>() + "/launch.json")
                           : json(nullptr);
  for (const char* f : {"gpu_memory_utilization", "max_model_len", "enable_expert_parallel", "enforce_eager",
                        "speculative_config", "compilation_config", "additional_config", "quantization",
                        "max_tokens", "image_url", "msprof_mem_freq", "attach_run", "baseline_run"})
    if (s.spec.contains(f)) m[f] = s.spec[f];
  m["service"] = service.empty() ? json(nullptr) : service;
  m["wrap_script"] = service.value("wrap_script", json(nullptr));

  m["baseline_hbm"] = HbmOf(d, "baseline");
  m["baseline_source"] = d.contains("baseline") ? json(d["baseline"].value("source", "")) : json(nullptr);
  m["after_ready_hbm"] = HbmOf(d, "after_ready");
  m["after_infer_hbm"] = HbmOf(d, "after_infer");

  json files = json::object();
  AddFile(files, "baseline_npu_smi.txt", d.value("baseline", json()));
  AddFile(files, "after_ready_npu_smi.txt", d.value("after_ready", json()));
  AddFile(files, "after_infer_npu_smi.txt", d.value("after_infer", json()));
  AddFile(files, "vllm_serve.log", d.value("vllm_log", json()));
  AddFile(files, "weight_manifest.json", d.value("weights", json()));
  AddFile(files, "model_config.json", d.value("model_config", json()));
  AddFile(files, "inference_response.json", d.value("inference", json()));

  json csvs = nullptr;
  if (d.contains("msprof") && d["msprof"].is_object()) {
    csvs = json::object();
    const json blobs = d["msprof"].value("blobs", json::object());
    for (const auto& [name, sha] : blobs.items()) {
      files[name] = sha;
      const std::string local = name.rfind("msprof_csvs/", 0) == 0 ? name.substr(12) : name;
      csvs[local] = name;
    }
    csvs["__prof_device_map__"] = d["msprof"].value("__prof_device_map__", json::object());
    m["msprof_prof_dirs"] = d["msprof"].value("prof_dirs", json::object());
  }
  m["msprof_csvs"] = csvs;
  m["msprof_status"] = report.value("msprof", json::object()).value("status", "");
  // How the wait for msprof's flush ended (signal, waited_ms, flush_timed_out).
  m["msprof_flush"] = d.value("flushed", json(nullptr));
  m["msprof_export"] = d.value("export", json(nullptr));
  m["model_config"] = d.contains("model_config") ? d["model_config"].value("content", json(nullptr)) : json(nullptr);
  m["weight_manifest"] = d.contains("weights") ? json("weight_manifest.json") : json(nullptr);
  m["inference"] = d.value("inference", json(nullptr));
  m["step_failures"] = d.value("step_failures", json::object());
  m["stop_escalated"] = d.value("stop_escalated", json(nullptr));
  m["files"] = files;
  // A baseline given as a saved npu-smi file travels in the spec, not a blob.
  if (s.spec.contains("baseline_npu_smi_text") && s.spec["baseline_npu_smi_text"].is_string() &&
      !files.contains("baseline_npu_smi.txt"))
    m["baseline_npu_smi_text"] = s.spec["baseline_npu_smi_text"];
  // A deployment over several machines: every other node's snapshots, flush
  // and export, its files under nodes/<machine>/ (the head's are the ones above).
  if (d.contains("node_evidence") && d["node_evidence"].is_object() && s.spec.contains("nodes")) {
    json nodes = json::array();
    const json& spec_nodes = s.spec["nodes"];
    for (size_t i = 1; i < spec_nodes.size(); ++i) {
      const std::string machine = spec_nodes[i].is_object() ? spec_nodes[i].value("machine", "") : "";
      const json ne = d["node_evidence"].value(std::to_string(i), json::object());
      const std::string dir = "nodes/" + machine + "/";
      AddFile(files, dir + "baseline_npu_smi.txt", ne.value("baseline", json()));
      AddFile(files, dir + "after_ready_npu_smi.txt", ne.value("after_ready", json()));
      AddFile(files, dir + "after_infer_npu_smi.txt", ne.value("after_infer", json()));
      AddFile(files, dir + "vllm_serve.log", ne.value("vllm_log", json()));
      if (ne.contains("msprof") && ne["msprof"].is_object()) {
        const json blobs = ne["msprof"].value("blobs", json::object());  // bound: items() refers to it
        for (const auto& [name, sha] : blobs.items()) files[dir + name] = sha;
      }
      nodes.push_back({{"node", i},
                       {"machine", machine},
                       {"baseline_hbm", HbmOf(ne, "baseline")},
                       {"after_ready_hbm", HbmOf(ne, "after_ready")},
                       {"after_infer_hbm", HbmOf(ne, "after_infer")},
                       {"service", ne.value("service", json(nullptr))},
                       {"msprof_flush", ne.value("flushed", json(nullptr))},
                       {"msprof_export", ne.value("export", json(nullptr))},
                       {"files_dir", dir}});
    }
    m["nodes"] = nodes;
    m["files"] = files;
  }
  m["summary"] = summary;
  m["report"] = report;
  return m;
}

}  // namespace npuprof::sm
