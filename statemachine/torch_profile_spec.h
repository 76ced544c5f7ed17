// Validation and normalisation of a torch-profile spec (docs/BEHAVIOUR.md#tp-inputs), and
// the service arguments it implies. Pure: no I/O.
//
// After ValidateTorchProfileSpec succeeds every optional field is present
// with its default, so later code reads spec fields without fallbacks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "statemachine/run_state.h"
#include "run_specs.pb.h"
#include "task_payloads.pb.h"

namespace npuprof::sm {

// Modes and request kinds accepted by --mode / --request-kind.
bool IsTorchProfileMode(const std::string& mode);
bool IsTorchProfileRequestKind(const std::string& kind);

// Checks every field of a torch-profile spec and fills defaults:
//   dp 1, enable_expert_parallel false, speculative_tokens 0,
//   speculative_method "qwen3_5_mtp", gpu_memory_utilization 0.85,
//   max_model_len 4096, max_num_seqs 2, max_num_batched_tokens 1024,
//   api_server_count null, prompt_tokens 2000, followup_output_tokens 5,
//   benchmark_total_requests 10, benchmark_concurrency 5,
//   benchmark_success_threshold 0.8, request_timeout 900,
//   profile_control_timeout 600, torch_profiler_dir "vllm_profile",
//   torch_profiler_with_stack false, image_path null, image_height 480,
//   flush_seconds 5, analyse_timeout_s 1800, analyse_parallel null; then the service fields
//   (ValidateServiceSpec: devices, port, env, health_timeout_s 300, ...).
// The error names the field and the fix; nothing has run when it fails.
Status ValidateTorchProfileSpec(json& spec);

// analyse_parallel (torch-profile and analyse-root): null by default (the
// number of analyse() processes at once is chosen from the target's means,
// statemachine/torch_profile_analyse_limit.h), else an integer 1..1024.
inline constexpr int64_t kMaxAnalyseParallel = 1024;
Status CheckAnalyseParallel(json& spec);

// The capture fields (docs/BEHAVIOUR.md#tp-capture; statemachine/torch_profile_capture.h):
// profile_delay_iterations 0..1000000, profile_max_iterations 1..10000000,
// torch_profiler_record_shapes, torch_profiler_with_memory,
// data_simplification and budget_check booleans, analyse_export_type
// "text" | "db". Unlike the fields above they stay absent when not given
// (a null is removed), so a spec without them is what it was before they
// existed; with any of them the run must be on one machine.
inline constexpr int64_t kMaxDelayIterations = 1000000;
inline constexpr int64_t kMaxProfileIterations = 10000000;
Status CheckCaptureFields(json& spec);

// tp * max(dp, 1), from the validated spec as its message (typed_spec.h).
int ExpectedRanks(const run_specs::TorchProfileSpec& spec);

// The vLLM arguments torch-profile adds (docs/BEHAVIOUR.md#tp-serve-args), in
// a fixed order, from the validated spec as its message (typed_spec.h).
std::vector<std::string> TorchProfileServeArgs(const run_specs::TorchProfileSpec& spec);

// The service.launch payload (launch number 1) for a validated spec: the
// serve args above plus PYTORCH_NPU_ALLOC_CONF=expandable_segments:True.
// A multi-node spec: node `node`'s payload (the head's rpc_port for the others).
tasks::ServiceLaunch TorchProfileLaunchPayload(const std::string& run_id, const run_specs::TorchProfileSpec& spec,
                                               int node = 0, std::optional<int32_t> rpc_port = std::nullopt);

// A path relative to the service's runtime dir: no leading '/', no "..",
// characters from [A-Za-z0-9._/-].
bool IsSafeRelativeDir(const std::string& p);
// A remote absolute path without control characters (model dirs, profile roots).
bool IsPlainAbsolutePath(const std::string& p);

}  // namespace npuprof::sm
