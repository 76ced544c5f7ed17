#include "statemachine/memory_profile_spec.h"

#include <fmt/format.h>

#include "common/json_depth.h"
#include "statemachine/deployment_spec.h"
#include "statemachine/operator_memory_steps.h"
#include "statemachine/service_spec.h"
#include "statemachine/spec_checks.h"

namespace npuprof::sm {

namespace {

bool IsSet(const json& spec, const char* f) {
  return spec.contains(f) && !spec[f].is_null() && !(spec[f].is_string() && spec[f].get<std::string>().empty());
}

bool HasControlChar(const std::string& s, bool allow_newline) {
  for (unsigned char c : s)
    if ((c < 0x20 && !(allow_newline && (c == '\n' || c == '\t'))) || c == 0x7f) return true;
  return false;
}

Status CheckBool(json& spec, const char* f) {
  if (!IsSet(spec, f)) {
    spec[f] = false;
    return Status::Ok();
  }
  if (!spec[f].is_boolean()) return Status::Invalid(fmt::format("{} must be true or false", f));
  return Status::Ok();
}

Status CheckJsonText(json& spec, const char* f) {
  if (!IsSet(spec, f)) {
    spec[f] = nullptr;
    return Status::Ok();
  }
  if (spec[f].is_object()) spec[f] = spec[f].dump();
  if (!spec[f].is_string()) return Status::Invalid(fmt::format("{} must be a JSON object (as text)", f));
  const Result<json> parsed = ParseJson(spec[f].get<std::string>());
  if (!parsed.ok() || !parsed->is_object())
    return Status::Invalid(fmt::format("{} is not a JSON object: pass e.g. --{} '{{\"key\": 1}}'", f,
                                       std::string(f) == "speculative_config"    ? "speculative-config"
                                       : std::string(f) == "compilation_config" ? "compilation-config"
                                                                                  : "additional-config"));
  return Status::Ok();
}

Status CheckHbmMap(const json& hbm, const char* field) {
  if (!hbm.is_object() || hbm.empty())
    return Status::Invalid(fmt::format("{} must map device ids to {{used_mb,total_mb}}", field));
  for (auto it = hbm.begin(); it != hbm.end(); ++it) {
    if (it.key().empty() || it.key().find_first_not_of("0123456789") != std::string::npos || !it->is_object() ||
        !(*it)["used_mb"].is_number())
      return Status::Invalid(fmt::format("{}: entry '{}' is not a device id with used_mb", field, it.key()));
  }
  return Status::Ok();
}

Status CheckBaseline(json& spec) {
  if (IsSet(spec, "baseline_run")) {
    if (Status s = RequireSafeName(spec, "baseline_run", true); !s.ok()) return s;
    const json rec = spec.value("baseline_run_record", json::object());
    const json data = rec.value("data", json::object());
    const bool has = (data.contains("baseline") && data["baseline"].is_object()) ||
                     (data.contains("probe") && data["probe"].is_object());
    if (!has)
      return Status::Invalid(fmt::format(
          "baseline_run '{}' holds no npu-smi baseline: use a memory-profile or probe run, or a saved npu-smi file",
          spec["baseline_run"].get<std::string>()));
  }
  if (IsSet(spec, "baseline_hbm")) {
    if (Status s = CheckHbmMap(spec["baseline_hbm"], "baseline_hbm"); !s.ok()) return s;
    if (IsSet(spec, "baseline_npu_smi_text") &&
        (!spec["baseline_npu_smi_text"].is_string() || spec["baseline_npu_smi_text"].get<std::string>().size() > (1 << 20)))
      return Status::Invalid("baseline_npu_smi_text must be the npu-smi text (at most 1 MiB)");
  }
  return Status::Ok();
}

Status CheckLiveFields(json& spec) {
  if (Status s = CheckIntRange(spec, "max_tokens", 128, 1, 65536); !s.ok()) return s;
  if (!IsSet(spec, "prompt")) spec["prompt"] = "Explain in detail how HBM memory is used when serving a large language model.";
  if (!spec["prompt"].is_string() || spec["prompt"].get<std::string>().size() > 100000 ||
      HasControlChar(spec["prompt"].get<std::string>(), true))
    return Status::Invalid("prompt must be text of at most 100000 characters");
  if (!IsSet(spec, "image_url")) {
    spec["image_url"] = nullptr;
  } else {
    const std::string u = spec["image_url"].is_string() ? spec["image_url"].get<std::string>() : "";
    if (!(u.rfind("http://", 0) == 0 || u.rfind("https://", 0) == 0 || u.rfind("data:image/", 0) == 0) ||
        HasControlChar(u, false))
      return Status::Invalid("image_url must be an http(s):// or data:image/... URL");
  }
  if (Status s = CheckIntRange(spec, "msprof_mem_freq", 50, 1, 100); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "export_timeout_s", 1800, 1, 86400); !s.ok()) return s;
  // flush_s: an optional minimum before the flush wait polls (default 0);
  // flush_timeout_s: how long the wait for msprof's flush may take.
  if (Status s = CheckIntRange(spec, "flush_s", 0, 0, 600); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "flush_timeout_s", 300, 1, 86400); !s.ok()) return s;
  return CheckIntRange(spec, "attach_ready_timeout_s", 60, 1, 3600);
}

// operator_memory (bool, default false) and operator_memory_top (1..100,
// default 10): standalone on one node only, and the profiler config is the
// run's own.
Status CheckOperatorMemory(json& spec, const std::string& mode) {
  if (Status s = CheckBool(spec, "operator_memory"); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "operator_memory_top", 10, 1, 100); !s.ok()) return s;
  if (!spec["operator_memory"].get<bool>()) return Status::Ok();
  if (mode != "standalone")
    return Status::Invalid(fmt::format("operator_memory: only a standalone memory-profile profiles operator memory "
                                       "(this one is {}); drop --operator-memory or run it standalone",
                                       mode));
  if (IsSet(spec, "nodes"))
    return Status::Invalid("operator_memory: a memory-profile over several nodes cannot profile operator memory "
                           "yet; drop --operator-memory or run it on one node");
  if (spec.contains("extra_args") && spec["extra_args"].is_array())
    for (const auto& a : spec["extra_args"])
      if (a.is_string() && a.get<std::string>().rfind("--profiler-config", 0) == 0)
        return Status::Invalid("operator_memory: the run sets vLLM's --profiler-config itself; drop it from the "
                               "extra arguments");
  return Status::Ok();
}

}  // namespace

Status ValidateMemorySpec(json& spec) {
  if (Status s = RequireSafeName(spec, "tag", false); !s.ok()) return s;
  if (!IsSet(spec, "mode")) spec["mode"] = IsSet(spec, "attach_run") ? "attach" : "standalone";
  const std::string mode = spec["mode"].is_string() ? spec["mode"].get<std::string>() : "";
  if (mode != "standalone" && mode != "attach" && mode != "install_wrapper")
    return Status::Invalid("mode must be standalone, attach or install_wrapper");
  if (Status s = CheckLiveFields(spec); !s.ok()) return s;
  if (Status s = CheckBaseline(spec); !s.ok()) return s;
  if (Status s = CheckOperatorMemory(spec, mode); !s.ok()) return s;

  if (mode != "standalone" && IsSet(spec, "nodes"))
    return Status::Invalid(fmt::format("nodes: a {} memory-profile runs on one machine; only a standalone "
                                       "memory-profile spans several nodes",
                                       mode));
  if (mode == "attach") {
    if (Status s = RequireSafeName(spec, "attach_run", true); !s.ok()) return s;
    const json rec = spec.value("attach_run_record", json::object());
    if (rec.value("kind", "") != "serve")
      return Status::Invalid(fmt::format("attach_run '{}' is a {} run: attach to a `serve` run (npuprof submit serve)",
                                         spec["attach_run"].get<std::string>(), rec.value("kind", "unknown")));
    const json svc = rec.value("service", json());
    if (!svc.is_object() || !svc.contains("runtime_dir"))
      return Status::Invalid(fmt::format("attach_run '{}' has no launched service to attach to",
                                         spec["attach_run"].get<std::string>()));
    if (Status s = RequireMachineRecord(spec); !s.ok()) return s;
    return RequireSafeName(spec, "machine", true);
  }

  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  if (Status s = RequireMachineRecord(spec); !s.ok()) return s;
  if (mode == "install_wrapper") return Status::Ok();

  // Standalone: the service fields with the memory workflow's defaults.
  if (!spec.contains("gpu_memory_utilization") || spec["gpu_memory_utilization"].is_null())
    spec["gpu_memory_utilization"] = 0.85;
  if (!spec["gpu_memory_utilization"].is_number() || spec["gpu_memory_utilization"].get<double>() <= 0 ||
      spec["gpu_memory_utilization"].get<double>() > 1)
    return Status::Invalid("gpu_memory_utilization must be a number in (0, 1], e.g. 0.85");
  if (Status s = CheckIntRange(spec, "max_model_len", 2048, 16, 10000000); !s.ok()) return s;
  for (const char* f : {"enable_expert_parallel", "enforce_eager"})
    if (Status s = CheckBool(spec, f); !s.ok()) return s;
  for (const char* f : {"speculative_config", "compilation_config", "additional_config"})
    if (Status s = CheckJsonText(spec, f); !s.ok()) return s;
  if (IsSet(spec, "quantization")) {
    if (Status s = RequireSafeName(spec, "quantization", true); !s.ok()) return s;
  } else {
    spec["quantization"] = nullptr;
  }
  if (IsSet(spec, "wrap_script"))
    return Status::Invalid("wrap_script: standalone memory-profile wraps the service with its own msprof script");
  if (IsSet(spec, "kv_cache_memory")) {
    if (Status s = CheckIntRange(spec, "kv_cache_memory", 0, 1, int64_t{1} << 50); !s.ok())
      return Status::Invalid(s.message() + " (bytes of KV cache per device, e.g. --kv-cache-memory 8589934592)");
  } else {
    spec["kv_cache_memory"] = nullptr;
  }
  // Devices default to 0..tp*dp-1, not "pick free" (docs/BEHAVIOUR.md#mem-inputs).
  if (Status s = CheckIntRange(spec, "tp", 1, 1, 64); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "dp", 1, 1, 64); !s.ok()) return s;
  if (Status s = ValidateDeployment(spec, /*default_device_range=*/true); !s.ok()) return s;
  // A deployment's devices are each node's own (nodes[i].devices, 0..tp*dp_local-1 by default).
  if (!IsMultiNodeSpec(spec) && !IsSet(spec, "devices")) {
    json devs = json::array();
    for (int64_t i = 0; i < spec["tp"].get<int64_t>() * spec["dp"].get<int64_t>(); ++i) devs.push_back(i);
    spec["devices"] = devs;
  }
  // served_model_name stays null unless given: the launch uses MemoryServedName (per run).
  ServiceDefaults defaults;
  defaults.stop_grace_s = 30;  // msprof exports after the app exits: give it time
  defaults.node_device_range = true;
  return ValidateServiceSpec(spec, "memory-profile", defaults);
}

std::vector<std::string> MemoryServeArgs(const run_specs::MemoryProfileSpec& spec) {
  std::vector<std::string> a = {"--gpu-memory-utilization", fmt::format("{}", spec.gpu_memory_utilization()),
                                "--max-model-len", std::to_string(spec.max_model_len()), "--trust-remote-code"};
  if (spec.enable_expert_parallel()) a.push_back("--enable-expert-parallel");
  if (spec.enforce_eager()) a.push_back("--enforce-eager");
  const auto given = [&](bool has, const std::string& value, const char* flag) {
    if (!has || value.empty()) return;
    a.push_back(flag);
    a.push_back(value);
  };
  given(spec.has_speculative_config(), spec.speculative_config(), "--speculative-config");
  given(spec.has_compilation_config(), spec.compilation_config(), "--compilation-config");
  given(spec.has_additional_config(), spec.additional_config(), "--additional-config");
  given(spec.has_quantization(), spec.quantization(), "--quantization");
  if (spec.has_kv_cache_memory()) a.insert(a.end(), {"--kv-cache-memory", std::to_string(spec.kv_cache_memory())});
  for (std::string& x : OperatorMemoryServeArgs(spec)) a.push_back(std::move(x));
  return a;
}

std::string MemoryServedName(const run_specs::MemoryProfileSpec& spec, const std::string& run_id) {
  return spec.has_served_model_name() ? spec.served_model_name() : "npuprof-mem-" + run_id;
}

std::string MemoryWrapScriptPath(const json& machine_record, const std::string& run_id) {
  return fmt::format("{}/{}/msprof_wrap.sh", RuntimeBaseOf(machine_record), run_id);
}

}  // namespace npuprof::sm
