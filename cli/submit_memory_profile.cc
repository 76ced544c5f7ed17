// `npuprof submit memory-profile ...`: per-device HBM attribution of a vLLM
// service (docs/BEHAVIOUR.md#memory; --baseline-from: #mem-baseline).
//   standalone: --machine M --model PATH --tp N [...] [-- extra vllm args]
//   attach:     --attach SERVE_RUN [--baseline-from RUN|FILE|DIR]
//   wrapper:    --machine M --install-wrapper  (prints the msprof wrap script
//               path on the target, for `npuprof submit serve --wrap-script`)
// --baseline-from: a saved `npu-smi info` file, a run directory holding
// baseline_npu_smi.txt (or a manifest.json with baseline_hbm), else a run id.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "cli/env_option.h"
#include "cli/submit_deployment.h"
#include "cli/submit_kinds.h"
#include "common/json_depth.h"
#include "parsers/npu_smi_parser.h"
#include "statemachine/device_ids.h"
#include "statemachine/managed_flags.h"

namespace npuprof::cli {

namespace {

struct MemOpts {
  std::string model, devices, served_name, speculative, compilation, additional, quantization, prompt, image_url;
  std::string attach, baseline_from, host;
  int tp = 1, dp = 1, port = 0, max_model_len = 2048, max_tokens = 128, mem_freq = 50;
  double gmu = 0.85;
  int64_t health_timeout = 300, export_timeout = 1800, flush_s = 0, flush_timeout = 300, stop_grace = 30;
  bool expert_parallel = false, eager = false, install_wrapper = false, operator_memory = false;
  int operator_memory_top = 10;
  int64_t kv_cache_memory = 0;  // bytes; 0 = not given (the utilization sizes the KV cache)
  std::vector<std::string> env, extra;
};

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Fills spec.baseline_* from --baseline-from. Returns an error message or "".
std::string ResolveBaseline(const std::string& from, json& spec) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string text_path;
  if (fs::is_directory(from, ec)) {
    if (fs::exists(fs::path(from) / "baseline_npu_smi.txt", ec)) {
      text_path = (fs::path(from) / "baseline_npu_smi.txt").string();
    } else if (auto m = ReadText((fs::path(from) / "manifest.json").string())) {
      Result<json> parsed = ParseJson(*m);
      const json man = parsed.ok() ? std::move(parsed).value() : json(nullptr);
      if (man.is_object() && man.contains("baseline_hbm") && man["baseline_hbm"].is_object()) {
        spec["baseline_hbm"] = man["baseline_hbm"];
        spec["baseline_origin"] = fs::absolute(from).string();
        return "";
      }
      return fmt::format("--baseline-from {}: the directory has no baseline_npu_smi.txt and no baseline_hbm in "
                         "manifest.json",
                         from);
    } else {
      return fmt::format("--baseline-from {}: the directory has no baseline_npu_smi.txt or manifest.json", from);
    }
  } else if (fs::is_regular_file(from, ec)) {
    text_path = from;
  }
  if (text_path.empty()) {
    spec["baseline_run"] = from;  // a run id; the server checks it
    return "";
  }
  auto text = ReadText(text_path);
  if (!text) return "--baseline-from: cannot read " + text_path;
  auto snap = parsers::ParseNpuSmi(*text);
  if (!snap.ok()) return fmt::format("--baseline-from {}: not npu-smi output: {}", text_path, snap.status().message());
  spec["baseline_hbm"] = parsers::HbmSnapshotJson(*snap);
  spec["baseline_npu_smi_text"] = *text;
  spec["baseline_origin"] = fs::absolute(text_path).string();
  return "";
}

}  // namespace

void AddSubmitMemoryProfile(CLI::App* submit) {
  auto c = std::make_shared<SubmitCommon>();
  auto o = std::make_shared<MemOpts>();
  auto dep = std::make_shared<DeploymentOpts>();
  auto* cmd = AddSubmitKind(submit, "memory-profile",
                            "Attribute each device's HBM to fixed overhead, weights, KV cache, graphs, HCCL, runtime, "
                            "activations and residual, with evidence. Standalone (--model) launches the service under "
                            "msprof (on every node with --node, repeated: the report keys each device by machine); "
                            "--attach SERVE_RUN profiles a running `serve` run. Extra vLLM arguments go after --",
                            c.get(), /*machine_required=*/false);
  AddDeploymentOptions(cmd, dep.get());
  cmd->add_option("--model", o->model, "Absolute path of the model dir on the target (standalone)");
  cmd->add_option("--tp", o->tp, "Tensor parallel size")->check(CLI::Range(1, 64));
  cmd->add_option("--dp", o->dp, "Data parallel size")->check(CLI::Range(1, 64));
  cmd->add_option("--devices", o->devices, "Device indices, e.g. 0,1 (default 0..tp*dp-1; with --node, each node's own: MACHINE:0,1)");
  cmd->add_option("--port", o->port, "Service port (default: a free port on the target)")->check(CLI::Range(1, 65535));
  cmd->add_option("--host", o->host,
                  "Address vLLM listens on: 127.0.0.1 (default), 0.0.0.0 or :: (npuprof reaches it at 127.0.0.1 "
                  "on the target)");
  cmd->add_option("--served-model-name", o->served_name, "Name the API serves (default npuprof-mem-<run id>)");
  cmd->add_option("--gpu-memory-utilization", o->gmu, "vLLM --gpu-memory-utilization (default 0.85)");
  cmd->add_option("--kv-cache-memory", o->kv_cache_memory,
                  "vLLM --kv-cache-memory: the KV cache size in bytes per device, instead of a share of HBM "
                  "(vLLM then ignores --gpu-memory-utilization for the KV cache)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 50));
  cmd->add_option("--env", o->env, "Extra environment KEY=VALUE for the service (repeat --env for more)")
      ->allow_extra_args(false);
  cmd->add_option("--max-model-len", o->max_model_len, "vLLM --max-model-len (default 2048)");
  cmd->add_flag("--enable-expert-parallel", o->expert_parallel, "vLLM --enable-expert-parallel");
  cmd->add_flag("--enforce-eager", o->eager, "vLLM --enforce-eager");
  cmd->add_option("--speculative-config", o->speculative, "vLLM --speculative-config JSON");
  cmd->add_option("--compilation-config", o->compilation, "vLLM --compilation-config JSON");
  cmd->add_option("--additional-config", o->additional, "vLLM --additional-config JSON");
  cmd->add_option("--quantization", o->quantization, "vLLM --quantization");
  cmd->add_option("--max-tokens", o->max_tokens, "max_tokens of the one inference request (default 128)");
  cmd->add_option("--prompt", o->prompt, "Prompt of the inference request");
  cmd->add_option("--image-url", o->image_url, "Image URL: the request goes to /v1/chat/completions");
  cmd->add_option("--msprof-mem-freq", o->mem_freq, "msprof --sys-hardware-mem-freq in Hz (default 50)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--health-timeout", o->health_timeout, "Seconds to wait for readiness (default 300)");
  cmd->add_option("--stop-grace", o->stop_grace,
                  "Seconds the stop waits after SIGINT and after SIGTERM (default 30: msprof exports after the app "
                  "exits)")
      ->check(CLI::Range(int64_t{1}, int64_t{600}));
  cmd->add_option("--export-timeout", o->export_timeout, "Seconds to wait for msprof --export (default 1800)");
  cmd->add_option("--flush-timeout", o->flush_timeout,
                  "Seconds to wait after the stop for msprof to exit with complete PROF dirs (default 300); "
                  "on timeout the run goes on with what exists");
  cmd->add_option("--flush-seconds", o->flush_s,
                  "Minimum wait after the stop before polling for msprof's flush (default 0)");
  cmd->add_flag("--operator-memory", o->operator_memory,
                "torch_npu memory profiling of the inference window: the operators holding memory at the activation "
                "peak and the fragmentation there (standalone, one node)");
  cmd->add_option("--operator-memory-top", o->operator_memory_top, "Operators listed per device at the peak (default 10)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--attach", o->attach, "Profile the service of this serve run (attach mode)");
  cmd->add_option("--baseline-from", o->baseline_from,
                  "Baseline npu-smi: a saved npu-smi file, a run directory, or a run id");
  cmd->add_flag("--install-wrapper", o->install_wrapper,
                "Only write the msprof wrap script on --machine; prints its path (wrap_script) for "
                "`npuprof submit serve --wrap-script PATH`");
  cmd->add_option("extra", o->extra,
                  "Extra vLLM arguments (after --); none of the flags npuprof manages (the options above)");
  cmd->callback([c, o, dep] {
    json spec = json::object();
    if (!o->baseline_from.empty()) {
      const std::string err = ResolveBaseline(o->baseline_from, spec);
      if (!err.empty()) return Fail(2, err);
    }
    spec["max_tokens"] = o->max_tokens;
    spec["msprof_mem_freq"] = o->mem_freq;
    spec["export_timeout_s"] = o->export_timeout;
    spec["flush_s"] = o->flush_s;
    spec["flush_timeout_s"] = o->flush_timeout;
    if (!o->prompt.empty()) spec["prompt"] = o->prompt;
    if (!o->image_url.empty()) spec["image_url"] = o->image_url;
    // Given to every mode: the validation refuses it, naming the field, where it cannot run.
    if (o->operator_memory) {
      spec["operator_memory"] = true;
      spec["operator_memory_top"] = o->operator_memory_top;
    }
    if (!dep->nodes.empty() && (o->install_wrapper || !o->attach.empty()))
      return Fail(2, "--node is for a standalone memory-profile (--model ...): --attach and --install-wrapper run on "
                     "one machine");
    if (o->install_wrapper) {
      if (c->machine.empty()) return Fail(2, "--install-wrapper needs --machine");
      spec["mode"] = "install_wrapper";
      return SubmitAndMaybeWait(*c, "memory-profile", spec, false);
    }
    if (!o->attach.empty() && (!o->env.empty() || o->kv_cache_memory > 0))
      return Fail(2, "--attach profiles the serve run's service as it runs: --env and --kv-cache-memory are for a "
                     "standalone memory-profile (or give them to `npuprof submit serve`)");
    if (!o->attach.empty()) {
      if (!o->model.empty() || !o->extra.empty())
        return Fail(2, "--attach uses the serve run's model and arguments: drop --model and the extra arguments");
      spec["mode"] = "attach";
      spec["attach_run"] = o->attach;
      return SubmitAndMaybeWait(*c, "memory-profile", spec, true);
    }
    if (c->machine.empty() && dep->nodes.empty())
      return Fail(2, "standalone memory-profile needs --machine (or --node, repeated; or use --attach SERVE_RUN)");
    // Refused here, before anything is sent: nothing is submitted.
    if (Status st = sm::CheckExtraArgs("memory-profile", o->extra); !st.ok()) return Fail(2, st.message());
    if (const std::string err = ApplyDeployment(*dep, *c, spec); !err.empty()) return Fail(2, err);
    if (o->model.empty()) return Fail(2, "standalone memory-profile needs --model /abs/path/on/the/target");
    spec["mode"] = "standalone";
    spec["model"] = o->model;
    spec["tp"] = o->tp;
    spec["dp"] = o->dp;
    if (!o->devices.empty()) {
      auto ids = sm::ParseDeviceIdText(o->devices);
      if (!ids.ok()) return Fail(2, ids.status().message());
      spec["devices"] = sm::DeviceIdsJson(*ids);
    }
    if (!o->host.empty()) spec["host"] = o->host;
    if (o->port > 0) spec["port"] = o->port;
    if (!o->served_name.empty()) spec["served_model_name"] = o->served_name;
    spec["gpu_memory_utilization"] = o->gmu;
    spec["max_model_len"] = o->max_model_len;
    spec["enable_expert_parallel"] = o->expert_parallel;
    spec["enforce_eager"] = o->eager;
    if (!o->speculative.empty()) spec["speculative_config"] = o->speculative;
    if (!o->compilation.empty()) spec["compilation_config"] = o->compilation;
    if (!o->additional.empty()) spec["additional_config"] = o->additional;
    if (!o->quantization.empty()) spec["quantization"] = o->quantization;
    spec["health_timeout_s"] = o->health_timeout;
    spec["stop_grace_s"] = o->stop_grace;
    spec["extra_args"] = o->extra;
    auto env = EnvFromFlags(o->env);
    if (!env.ok()) return Fail(2, env.status().message());
    spec["env"] = *env;
    if (o->kv_cache_memory > 0) spec["kv_cache_memory"] = o->kv_cache_memory;
    SubmitAndMaybeWait(*c, "memory-profile", spec, true);
  });
}

}  // namespace npuprof::cli
