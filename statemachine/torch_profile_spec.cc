#include "statemachine/torch_profile_spec.h"

#include <algorithm>

#include <fmt/format.h>

#include "statemachine/deployment_service.h"
#include "statemachine/service_spec.h"
#include "statemachine/spec_checks.h"
#include "statemachine/torch_profile_capture.h"

namespace npuprof::sm {

namespace {

Status Missing(const std::string& field) {
  std::string flag = field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return Status::Invalid(fmt::format("{} is required: pass --{}", field, flag));
}

bool Present(const json& spec, const std::string& f) { return spec.contains(f) && !spec[f].is_null(); }

Status CheckBool(json& spec, const std::string& field, bool def) {
  if (!Present(spec, field)) {
    spec[field] = def;
    return Status::Ok();
  }
  if (!spec[field].is_boolean()) return Status::Invalid(fmt::format("{} must be true or false", field));
  return Status::Ok();
}

Status CheckDouble(json& spec, const std::string& field, double def, double lo, double hi, bool lo_open) {
  if (!Present(spec, field)) {
    spec[field] = def;
    return Status::Ok();
  }
  if (!spec[field].is_number())
    return Status::Invalid(fmt::format("{} must be a number in {}{}..{}]", field, lo_open ? "(" : "[", lo, hi));
  const double v = spec[field].get<double>();
  if (v > hi || v < lo || (lo_open && v == lo))
    return Status::Invalid(fmt::format("{} = {} is out of range: use a value in {}{}, {}]", field, v,
                                       lo_open ? "(" : "[", lo, hi));
  return Status::Ok();
}

Status RequireInt(json& spec, const std::string& field, int64_t lo, int64_t hi) {
  if (!Present(spec, field)) return Missing(field);
  return CheckIntRange(spec, field, 0, lo, hi);
}

bool NoControlChars(const std::string& s) {
  return std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

// Served model names look like "qwen" or "Qwen/Qwen2.5-7B".
bool IsServedName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '-') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == '/' || c == ':';
  });
}

Status CheckEnum(const json& spec, const std::string& field, bool (*ok)(const std::string&), const char* choices) {
  if (!Present(spec, field)) return Missing(field);
  if (!spec[field].is_string() || !ok(spec[field].get<std::string>()))
    return Status::Invalid(fmt::format("{} '{}' is not known: use one of {}", field,
                                       spec[field].is_string() ? spec[field].get<std::string>() : spec[field].dump(),
                                       choices));
  return Status::Ok();
}

}  // namespace

bool IsTorchProfileMode(const std::string& m) {
  return m == "enforce_eager" || m == "full_decode_only" || m == "piecewise_graph";
}

bool IsTorchProfileRequestKind(const std::string& k) { return k == "text" || k == "vl"; }

bool IsSafeRelativeDir(const std::string& p) {
  if (p.empty() || p.size() > 200 || p[0] == '/' || p[0] == '-') return false;
  if (!std::all_of(p.begin(), p.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-' || c == '/';
      }))
    return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool IsPlainAbsolutePath(const std::string& p) {
  return !p.empty() && p.size() <= 4096 && p[0] == '/' && NoControlChars(p);
}

Status CheckAnalyseParallel(json& spec) {
  if (!Present(spec, "analyse_parallel")) {
    spec["analyse_parallel"] = nullptr;
    return Status::Ok();
  }
  const json& v = spec["analyse_parallel"];
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxAnalyseParallel)
    return Status::Invalid(fmt::format(
        "analyse_parallel = {} is not allowed: pass --analyse-parallel N with N from 1 to {} (analyse() processes "
        "at once per machine), or leave it out to choose from the target's cores and free memory",
        v.dump(), kMaxAnalyseParallel));
  return Status::Ok();
}

Status CheckCaptureFields(json& spec) {
  // Absent or null = not given; a given value is checked and kept. Nothing is
  // filled in, so a spec without them is what it was before they existed.
  const auto optional_int = [&](const char* field, const char* flag, int64_t lo, int64_t hi) -> Status {
    if (!Present(spec, field)) return Status::Ok();
    const json& v = spec[field];
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return Status::Invalid(fmt::format("{} = {} is out of range: pass {} N with N from {} to {}", field, v.dump(),
                                         flag, lo, hi));
    return Status::Ok();
  };
  const auto optional_bool = [&](const char* field, const char* flag) -> Status {
    if (!Present(spec, field) || spec[field].is_boolean()) return Status::Ok();
    return Status::Invalid(fmt::format("{} must be true or false: pass {} true|false", field, flag));
  };
  if (Status s = optional_int("profile_delay_iterations", "--profile-delay-iterations", 0, kMaxDelayIterations);
      !s.ok())
    return s;
  if (Status s = optional_int("profile_max_iterations", "--profile-max-iterations", 1, kMaxProfileIterations);
      !s.ok())
    return s;
  if (Status s = optional_bool("torch_profiler_record_shapes", "--record-shapes"); !s.ok()) return s;
  if (Status s = optional_bool("torch_profiler_with_memory", "--profile-memory"); !s.ok()) return s;
  if (Status s = optional_bool("data_simplification", "--data-simplification"); !s.ok()) return s;
  if (Status s = optional_bool("budget_check", "--budget-check"); !s.ok()) return s;
  if (Present(spec, "analyse_export_type") &&
      (!spec["analyse_export_type"].is_string() ||
       (spec["analyse_export_type"] != "text" && spec["analyse_export_type"] != "db")))
    return Status::Invalid(fmt::format("analyse_export_type {} is not known: pass --analyse-export-type text or db",
                                       spec["analyse_export_type"].dump()));
  for (const char* f : {"profile_delay_iterations", "profile_max_iterations", "torch_profiler_record_shapes",
                        "torch_profiler_with_memory", "data_simplification", "analyse_export_type", "budget_check"})
    if (spec.contains(f) && spec[f].is_null()) spec.erase(f);
  const bool wanted = spec.contains("profile_delay_iterations") || spec.contains("profile_max_iterations") ||
                      spec.contains("torch_profiler_record_shapes") || spec.contains("torch_profiler_with_memory") ||
                      spec.contains("data_simplification") || spec.contains("analyse_export_type") ||
                      (spec.contains("budget_check") && spec["budget_check"] == true);
  if (wanted && spec.contains("nodes") && spec["nodes"].is_array() && spec["nodes"].size() > 1)
    return Status::Invalid(
        "the capture flags and --budget-check are for one-machine runs: the capture check runs on one machine "
        "before its launch; leave them out of a --node deployment");
  return Status::Ok();
}

Status ValidateTorchProfileSpec(json& spec) {
  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  if (!Present(spec, "tag")) return Missing("tag");
  if (Status s = RequireSafeName(spec, "tag", true); !s.ok()) return s;
  if (!Present(spec, "model")) return Missing("model");
  if (!spec["model"].is_string() || !IsPlainAbsolutePath(spec["model"].get<std::string>()))
    return Status::Invalid("model must be an absolute path on the target (the model directory), without control characters");
  if (!Present(spec, "served_model_name")) return Missing("served_model_name");
  if (!spec["served_model_name"].is_string() || !IsServedName(spec["served_model_name"].get<std::string>()))
    return Status::Invalid("served_model_name is not allowed: use 1-128 characters from A-Z a-z 0-9 . _ - / :");
  if (Status s = RequireInt(spec, "tp", 1, 64); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "dp", 1, 1, 64); !s.ok()) return s;
  if (Status s = CheckEnum(spec, "mode", IsTorchProfileMode, "enforce_eager, full_decode_only, piecewise_graph");
      !s.ok())
    return s;
  if (Status s = CheckEnum(spec, "request_kind", IsTorchProfileRequestKind, "text, vl"); !s.ok()) return s;
  if (Status s = RequireInt(spec, "benchmark_output_tokens", 1, 1 << 20); !s.ok()) return s;

  if (Status s = CheckBool(spec, "enable_expert_parallel", false); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "speculative_tokens", 0, 0, 64); !s.ok()) return s;
  if (!Present(spec, "speculative_method")) spec["speculative_method"] = "qwen3_5_mtp";
  if (!spec["speculative_method"].is_string() || !IsSafeName(spec["speculative_method"].get<std::string>()))
    return Status::Invalid("speculative_method is not allowed: use 1-64 characters from A-Z a-z 0-9 . _ -");
  if (Status s = CheckDouble(spec, "gpu_memory_utilization", 0.85, 0.0, 1.0, true); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "max_model_len", 4096, 16, 1 << 24); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "max_num_seqs", 2, 1, 1 << 16); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "max_num_batched_tokens", 1024, 1, 1 << 24); !s.ok()) return s;
  if (Present(spec, "api_server_count")) {
    if (Status s = CheckIntRange(spec, "api_server_count", 1, 1, 256); !s.ok()) return s;
  } else {
    spec["api_server_count"] = nullptr;
  }
  if (Status s = CheckIntRange(spec, "prompt_tokens", 2000, 1, 1 << 22); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "followup_output_tokens", 5, 1, 1 << 20); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "benchmark_total_requests", 10, 0, 100000); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "benchmark_concurrency", 5, 1, 1024); !s.ok()) return s;
  if (Status s = CheckDouble(spec, "benchmark_success_threshold", 0.8, 0.0, 1.0, false); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "request_timeout", 900, 1, 86400); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "profile_control_timeout", 600, 1, 86400); !s.ok()) return s;
  if (!Present(spec, "torch_profiler_dir")) spec["torch_profiler_dir"] = "vllm_profile";
  if (!spec["torch_profiler_dir"].is_string() || !IsSafeRelativeDir(spec["torch_profiler_dir"].get<std::string>()))
    return Status::Invalid(
        "torch_profiler_dir must be a relative path inside the runtime dir (A-Z a-z 0-9 . _ - /, no '..')");
  if (Status s = CheckBool(spec, "torch_profiler_with_stack", false); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "image_height", 480, 16, 8192); !s.ok()) return s;
  if (spec["request_kind"] == "vl") {
    if (!Present(spec, "image_path") || !spec["image_path"].is_string() ||
        spec["image_path"].get<std::string>().empty())
      return Status::Invalid("image_path is required for --request-kind vl: pass --image-path <png file>");
    if (!IsPlainAbsolutePath(spec["image_path"].get<std::string>()))
      return Status::Invalid("image_path must be an absolute path without control characters");
  } else if (!Present(spec, "image_path")) {
    spec["image_path"] = nullptr;
  }
  // flush_seconds: an optional minimum before the flush wait polls (default 0);
  // flush_timeout: how long the wait for torch_npu's finalise may take.
  if (Status s = CheckIntRange(spec, "flush_seconds", 0, 0, 600); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "flush_timeout", 300, 1, 86400); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "analyse_timeout_s", 1800, 1, 86400); !s.ok()) return s;
  if (Status s = CheckAnalyseParallel(spec); !s.ok()) return s;
  if (Status s = CheckCaptureFields(spec); !s.ok()) return s;
  if (Status s = RequireMachineRecord(spec); !s.ok()) return s;
  // Service fields shared with the other service kinds: devices, port, env,
  // extra_args, wrap_script, health_timeout_s, stop_grace_s.
  return ValidateServiceSpec(spec, "torch-profile");
}

int ExpectedRanks(const run_specs::TorchProfileSpec& spec) {
  return static_cast<int>(spec.tp() * std::max<int64_t>(spec.dp(), 1));
}

std::vector<std::string> TorchProfileServeArgs(const run_specs::TorchProfileSpec& spec) {
  std::vector<std::string> a = {
      "--max-model-len",          std::to_string(spec.max_model_len()),
      "--trust-remote-code",
      "--gpu-memory-utilization", fmt::format("{}", spec.gpu_memory_utilization()),
      "--max-num-seqs",           std::to_string(spec.max_num_seqs()),
      "--max-num-batched-tokens", std::to_string(spec.max_num_batched_tokens()),
  };
  if (spec.has_api_server_count()) {
    a.push_back("--api-server-count");
    a.push_back(std::to_string(spec.api_server_count()));
  }
  json profiler = {{"profiler", "torch"},
                   {"torch_profiler_dir", "./" + spec.torch_profiler_dir()},
                   {"torch_profiler_with_stack", spec.torch_profiler_with_stack()}};
  AddCaptureConfig(spec, profiler);  // the capture flags given, nothing otherwise
  a.push_back("--profiler-config");
  a.push_back(profiler.dump());
  if (spec.speculative_tokens() > 0) {
    const json spec_cfg = {{"method", spec.speculative_method()},
                           {"num_speculative_tokens", spec.speculative_tokens()}};
    a.push_back("--speculative-config");
    a.push_back(spec_cfg.dump());
  }
  if (spec.enable_expert_parallel()) a.push_back("--enable-expert-parallel");
  if (spec.mode() == "enforce_eager") {
    a.push_back("--enforce-eager");
  } else {
    a.push_back("--compilation-config");
    a.push_back(json{{"cudagraph_mode", spec.mode() == "full_decode_only" ? "FULL_DECODE_ONLY" : "PIECEWISE"}}.dump());
  }
  return a;
}

tasks::ServiceLaunch TorchProfileLaunchPayload(const std::string& run_id, const run_specs::TorchProfileSpec& spec,
                                               int node, std::optional<int32_t> rpc_port) {
  const json env = {{"PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True"}};
  if (spec.nodes_size() > 1) return BuildNodeLaunchPayload(run_id, 1, spec, node, rpc_port, TorchProfileServeArgs(spec), env);
  return BuildLaunchPayload(run_id, 1, spec, TorchProfileServeArgs(spec), env);
}

}  // namespace npuprof::sm
