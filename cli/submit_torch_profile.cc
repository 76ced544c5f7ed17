// `npuprof submit torch-profile` and `npuprof submit analyse-root`
// (docs/BEHAVIOUR.md#tp-inputs, #analyse-root). Flags keep the reference scripts' names; values are checked
// again by the run kind before anything runs.
#include <filesystem>
#include <optional>

#include "cli/submit_deployment.h"
#include "cli/submit_kinds.h"
#include "statemachine/device_ids.h"
#include "statemachine/torch_profile_spec.h"

namespace npuprof::cli {

namespace {

struct TorchProfileFlags {
  std::string model, served_model_name, mode, request_kind, speculative_method, torch_profiler_dir, image_path,
      devices, host;
  std::optional<int64_t> tp, dp, benchmark_output_tokens, speculative_tokens, max_model_len, max_num_seqs,
      max_num_batched_tokens, api_server_count, prompt_tokens, followup_output_tokens, benchmark_total_requests,
      benchmark_concurrency, request_timeout, profile_control_timeout, image_height, flush_seconds,
      flush_timeout, health_timeout, analyse_timeout, analyse_parallel, port, profile_delay_iterations,
      profile_max_iterations;
  // Capture controls (docs/BEHAVIOUR.md#tp-capture): absent unless given.
  std::optional<bool> record_shapes, profile_memory, data_simplification, budget_check;
  std::string analyse_export_type;
  std::optional<double> gpu_memory_utilization, benchmark_success_threshold;
  bool enable_expert_parallel = false, torch_profiler_with_stack = false;
};

constexpr const char* kAnalyseParallelHelp =
    "analyse() processes at once per machine, 1..1024 (default: chosen from the target's cores, free memory and "
    "each rank's raw size, 20x the raw size per process)";

// --analyse-parallel out of range: the message; "" when fine or not given.
std::string AnalyseParallelError(const std::optional<int64_t>& n) {
  if (!n || (*n >= 1 && *n <= sm::kMaxAnalyseParallel)) return "";
  return "--analyse-parallel " + std::to_string(*n) + " is not allowed: give 1.." +
         std::to_string(sm::kMaxAnalyseParallel) +
         " analyse() processes at once, or leave it out to choose from the target's cores and free memory";
}

template <typename T>
void Put(json& spec, const char* field, const std::optional<T>& v) {
  if (v) spec[field] = *v;
}

json SpecFrom(const TorchProfileFlags& f) {
  json s = {{"model", f.model},
            {"served_model_name", f.served_model_name},
            {"mode", f.mode},
            {"request_kind", f.request_kind},
            {"enable_expert_parallel", f.enable_expert_parallel},
            {"torch_profiler_with_stack", f.torch_profiler_with_stack}};
  Put(s, "tp", f.tp);
  Put(s, "dp", f.dp);
  Put(s, "benchmark_output_tokens", f.benchmark_output_tokens);
  Put(s, "speculative_tokens", f.speculative_tokens);
  if (!f.speculative_method.empty()) s["speculative_method"] = f.speculative_method;
  Put(s, "gpu_memory_utilization", f.gpu_memory_utilization);
  Put(s, "max_model_len", f.max_model_len);
  Put(s, "max_num_seqs", f.max_num_seqs);
  Put(s, "max_num_batched_tokens", f.max_num_batched_tokens);
  Put(s, "api_server_count", f.api_server_count);
  Put(s, "prompt_tokens", f.prompt_tokens);
  Put(s, "followup_output_tokens", f.followup_output_tokens);
  Put(s, "benchmark_total_requests", f.benchmark_total_requests);
  Put(s, "benchmark_concurrency", f.benchmark_concurrency);
  Put(s, "benchmark_success_threshold", f.benchmark_success_threshold);
  Put(s, "request_timeout", f.request_timeout);
  Put(s, "profile_control_timeout", f.profile_control_timeout);
  if (!f.torch_profiler_dir.empty()) s["torch_profiler_dir"] = f.torch_profiler_dir;
  if (!f.image_path.empty()) {
    // The image is read by a worker on this machine: pass an absolute path.
    std::error_code ec;
    auto abs = std::filesystem::absolute(f.image_path, ec);
    s["image_path"] = ec ? f.image_path : abs.lexically_normal().string();
  }
  Put(s, "image_height", f.image_height);
  Put(s, "flush_seconds", f.flush_seconds);
  Put(s, "flush_timeout", f.flush_timeout);
  Put(s, "health_timeout_s", f.health_timeout);
  Put(s, "analyse_timeout_s", f.analyse_timeout);
  Put(s, "analyse_parallel", f.analyse_parallel);
  Put(s, "port", f.port);
  if (!f.host.empty()) s["host"] = f.host;
  Put(s, "profile_delay_iterations", f.profile_delay_iterations);
  Put(s, "profile_max_iterations", f.profile_max_iterations);
  Put(s, "torch_profiler_record_shapes", f.record_shapes);
  Put(s, "torch_profiler_with_memory", f.profile_memory);
  Put(s, "data_simplification", f.data_simplification);
  Put(s, "budget_check", f.budget_check);
  if (!f.analyse_export_type.empty()) s["analyse_export_type"] = f.analyse_export_type;
  return s;
}

void AddTorchProfile(CLI::App* submit) {
  auto c = std::make_shared<SubmitCommon>();
  auto f = std::make_shared<TorchProfileFlags>();
  auto dep = std::make_shared<DeploymentOpts>();
  auto* cmd = AddSubmitKind(submit, "torch-profile",
                            "Collect one torch-profiler case: profiled vLLM service (on one machine, or a deployment "
                            "over several: --node, repeated), workload between /start_profile and /stop_profile, "
                            "analyse() per rank, manifest",
                            c.get(), /*machine_required=*/false);
  AddDeploymentOptions(cmd, dep.get());
  cmd->add_option("--model", f->model, "Model directory on the target")->required();
  cmd->add_option("--served-model-name", f->served_model_name, "Served model name")->required();
  cmd->add_option("--tp", f->tp, "Tensor parallel size")->required();
  cmd->add_option("--mode", f->mode, "enforce_eager | full_decode_only | piecewise_graph")->required();
  cmd->add_option("--request-kind", f->request_kind, "text | vl")->required();
  cmd->add_option("--benchmark-output-tokens", f->benchmark_output_tokens, "max_tokens of each wave request")
      ->required();
  cmd->add_option("--dp", f->dp, "Data parallel size (default 1)");
  cmd->add_flag("--enable-expert-parallel", f->enable_expert_parallel, "Pass --enable-expert-parallel");
  cmd->add_option("--speculative-tokens", f->speculative_tokens, "0 = no --speculative-config (default 0)");
  cmd->add_option("--speculative-method", f->speculative_method, "Speculative method (default qwen3_5_mtp)");
  cmd->add_option("--gpu-memory-utilization", f->gpu_memory_utilization, "Default 0.85");
  cmd->add_option("--max-model-len", f->max_model_len, "Default 4096");
  cmd->add_option("--max-num-seqs", f->max_num_seqs, "Default 2");
  cmd->add_option("--max-num-batched-tokens", f->max_num_batched_tokens, "Default 1024");
  cmd->add_option("--api-server-count", f->api_server_count, "Pass --api-server-count N");
  cmd->add_option("--prompt-tokens", f->prompt_tokens, "Words per prompt (default 2000)");
  cmd->add_option("--followup-output-tokens", f->followup_output_tokens, "max_tokens of the follow-up (default 5)");
  cmd->add_option("--benchmark-total-requests", f->benchmark_total_requests, "Wave size (default 10)");
  cmd->add_option("--benchmark-concurrency", f->benchmark_concurrency, "Requests in flight (default 5)");
  cmd->add_option("--benchmark-success-threshold", f->benchmark_success_threshold,
                  "Minimum ok/total of the wave, 0..1 (default 0.8)");
  cmd->add_option("--request-timeout", f->request_timeout, "Seconds per request (default 900)");
  cmd->add_option("--profile-control-timeout", f->profile_control_timeout,
                  "Seconds for /start_profile and /stop_profile (default 600)");
  cmd->add_option("--torch-profiler-dir", f->torch_profiler_dir,
                  "Profiler output dir, relative to the runtime dir (default vllm_profile)");
  cmd->add_flag("--torch-profiler-with-stack,--with-stack", f->torch_profiler_with_stack,
                "torch_profiler_with_stack=true");
  // Capture controls: each names a field of the target vLLM's ProfilerConfig,
  // checked there before the launch (refused when the field is missing).
  cmd->add_option("--profile-delay-iterations", f->profile_delay_iterations,
                  "Profiler window starts this many engine steps after /start_profile (ProfilerConfig "
                  "delay_iterations; 0..1000000)");
  cmd->add_option("--profile-max-iterations", f->profile_max_iterations,
                  "Profiler window ends after this many engine steps (ProfilerConfig max_iterations; 1..10000000)");
  cmd->add_option("--record-shapes", f->record_shapes, "true|false: ProfilerConfig torch_profiler_record_shapes");
  cmd->add_option("--profile-memory", f->profile_memory, "true|false: ProfilerConfig torch_profiler_with_memory");
  cmd->add_option("--data-simplification", f->data_simplification,
                  "true|false: ProfilerConfig torch_profiler_data_simplification (refused when the target's vLLM "
                  "has no such field)");
  cmd->add_option("--analyse-export-type", f->analyse_export_type, "text | db: analyse(export_type=...) per rank");
  cmd->add_option("--budget-check", f->budget_check,
                  "true: check free disk and memory against the capture estimate before the launch even without a "
                  "capture flag (a capture flag always checks)");
  cmd->add_option("--image-path", f->image_path, "PNG image for --request-kind vl (read on this machine)");
  cmd->add_option("--image-height", f->image_height, "Resize the image to this height (default 480)");
  cmd->add_option("--devices", f->devices, "NPU device indices, e.g. 0,1 (default: free ones)");
  cmd->add_option("--port", f->port, "Service port on the target (default: a free one)");
  cmd->add_option("--host", f->host,
                  "Address vLLM listens on: 127.0.0.1 (default), 0.0.0.0 or :: (npuprof reaches it at 127.0.0.1 "
                  "on the target)");
  cmd->add_option("--health-timeout", f->health_timeout, "Seconds to wait for readiness (default 300)");
  cmd->add_option("--analyse-timeout", f->analyse_timeout, "Seconds per rank for analyse() (default 1800)");
  cmd->add_option("--analyse-parallel", f->analyse_parallel, kAnalyseParallelHelp);
  cmd->add_option("--flush-timeout", f->flush_timeout,
                  "Seconds to wait after /stop_profile for torch_npu to finalise every rank (default 300); "
                  "on timeout the run goes on and the gates judge what was written");
  cmd->add_option("--flush-seconds", f->flush_seconds,
                  "Minimum wait after /stop_profile before polling for the finalise (default 0)");
  cmd->callback([c, f, dep] {
    if (const std::string err = AnalyseParallelError(f->analyse_parallel); !err.empty()) return Fail(2, err);
    if (!f->image_path.empty() && !std::filesystem::is_regular_file(f->image_path))
      return Fail(2, "image_path '" + f->image_path + "' is not a readable file");
    json spec = SpecFrom(*f);
    if (!f->devices.empty()) {
      auto ids = sm::ParseDeviceIdText(f->devices);
      if (!ids.ok()) return Fail(2, ids.status().message());
      spec["devices"] = sm::DeviceIdsJson(*ids);
    }
    if (const std::string err = ApplyDeployment(*dep, *c, spec); !err.empty()) return Fail(2, err);
    if (!c->tag.empty()) spec["tag"] = c->tag;
    SubmitAndMaybeWait(*c, "torch-profile", spec, true);
  });
}

void AddAnalyseRoot(CLI::App* submit) {
  auto c = std::make_shared<SubmitCommon>();
  auto root = std::make_shared<std::string>();
  auto expected = std::make_shared<std::optional<int64_t>>();
  auto timeout = std::make_shared<std::optional<int64_t>>();
  auto parallel = std::make_shared<std::optional<int64_t>>();
  auto* cmd = AddSubmitKind(submit, "analyse-root",
                            "Run analyse() on every *_ascend_pt under an existing profile root and verify outputs",
                            c.get());
  cmd->add_option("--profile-root", *root, "Profile root on the target (absolute)")->required();
  cmd->add_option("--expected-ranks", *expected, "tp * max(dp,1) of the capture")->required();
  cmd->add_option("--analyse-timeout", *timeout, "Seconds per rank for analyse() (default 1800)");
  cmd->add_option("--analyse-parallel", *parallel, kAnalyseParallelHelp);
  cmd->callback([c, root, expected, timeout, parallel] {
    if (const std::string err = AnalyseParallelError(*parallel); !err.empty()) return Fail(2, err);
    json spec = {{"profile_root", *root}};
    if (*parallel) spec["analyse_parallel"] = **parallel;
    if (*expected) spec["expected_ranks"] = **expected;
    if (*timeout) spec["analyse_timeout_s"] = **timeout;
    SubmitAndMaybeWait(*c, "analyse-root", spec, true);
  });
}

}  // namespace

void AddSubmitTorchProfile(CLI::App* submit) {
  AddTorchProfile(submit);
  AddAnalyseRoot(submit);
}

}  // namespace npuprof::cli
