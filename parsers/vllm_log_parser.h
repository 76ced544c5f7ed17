// Parser of vLLM / vllm-ascend server logs (stdout and stderr, mixed). Pure:
// text in, summary out. Spec: /work/shared/spec/vllm-log-formats.md.
//
// Every extracted value carries its evidence: the 1-based line number in the
// input (counted by '\n') and the line's text with colour codes removed (for a
// line redrawn with '\r', the '\r'-separated piece that matched).
//
// Remote bytes: a line (a '\r'-separated piece) is read as its first 8 KiB;
// real vLLM lines are shorter (the v0.18 engine-config line is 3.2 KiB), and
// an unbounded line would make the regexes recurse past the stack. A number
// is kept only when finite and within +/-2^63 (parsers/finite_number.h). The
// summary keeps the bytes as read; VllmLogToJson makes its text valid UTF-8.
//
// Units: "Loading model weights took X GB" and "Model loading took X GB" are
// GiB (vLLM divided by 2**30); "MiB" values are converted to GiB; vllm-ascend
// "Available memory: <bytes>" is converted from bytes to GiB.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npuprof::parsers {

struct LogEvidence {
  int64_t line = 0;  // 1-based
  std::string text;  // the matched line, colour codes removed
};

// A per-rank memory summary, from the V0 "Memory profiling takes ..." block,
// the V0 "Memory profiling results: ..." line, or the V1 / vllm-ascend
// "Free memory on device ... Actual usage ..." line. All GiB unless named.
struct VllmMemoryProfile {
  std::optional<double> profile_seconds;
  std::optional<double> total_gib;               // total device memory
  std::optional<double> free_gib;                // free on startup (V1 summary)
  std::optional<double> requested_gib;           // total x gpu_memory_utilization
  std::optional<double> gpu_memory_utilization;  // a fraction, e.g. 0.9
  std::optional<double> weights_gib;
  std::optional<double> consumed_gib;  // vLLM "consumed memory (weights + non-torch)"
  std::optional<double> non_torch_gib;
  std::optional<double> peak_activation_gib;
  std::optional<double> graph_gib;     // "CUDAGraph memory" / "NPU graph memory"
  std::optional<double> kv_cache_gib;  // KV cache reserved / current

  bool empty() const;
};

// Facts printed by one process (one rank).
struct VllmRankFacts {
  std::optional<double> weights_gib;             // first, best source
  std::optional<double> weights_load_seconds;    // first, best source
  std::optional<double> kv_cache_available_gib;  // first, best source
  std::optional<double> graph_capture_gib;       // max, best source
  int graph_capture_count = 0;                   // "Graph capturing finished" lines
  VllmMemoryProfile memory_profile;
  // Field name ("weights_gib", "memory_profile.total_gib", ...) -> its line.
  std::map<std::string, LogEvidence> evidence;
};

// A known environment problem (missing vllm / vllm_ascend / torch_npu, a
// missing shared library, ...). `kind` is one of: missing_vllm,
// missing_vllm_ascend, missing_torch_npu, libhccl, shared_object, device_type,
// import_error.
struct VllmEnvError {
  std::string kind;
  int64_t line = 0;
  std::string text;
};

struct VllmLogSummary {
  // Per process: key = the innermost process prefix as printed, without its
  // parentheses ("VllmWorkerProcess pid=6923", "Worker_TP0 pid=104958");
  // "" for unprefixed lines (the V0 driver rank). Only processes that printed
  // a rank fact appear.
  std::map<std::string, VllmRankFacts> ranks;
  bool ranks_differ = false;  // some rank fact differs between ranks

  // Run level. Weights / KV / load time: the best source, first in log order
  // (per-rank values are in `ranks`). Graph capture: max over all lines.
  std::optional<double> weights_gib;
  std::optional<double> weights_load_seconds;
  std::optional<double> kv_cache_available_gib;
  std::optional<int64_t> kv_cache_tokens;  // "GPU KV cache size: N tokens"
  std::optional<int64_t> gpu_blocks;       // device blocks: "# GPU/CUDA/CPU blocks: N", "num_gpu_blocks is: N"
  std::optional<int64_t> cpu_blocks;       // the second number of "# X blocks: N, # CPU blocks: M"
  std::optional<double> max_concurrency;   // "... per request: 6.49x" -> 6.49
  std::optional<int64_t> max_concurrency_tokens_per_request;
  std::optional<double> graph_capture_gib;
  int graph_capture_count = 0;  // "Graph capturing finished" lines (summary-line graph values are not counted)
  std::optional<double> graph_capture_secs;      // max "finished in S secs"
  std::optional<double> compile_warmup_seconds;  // "torch.compile and initial profiling/warmup run together took X s"
  std::optional<double> torch_compile_seconds;   // "torch.compile takes/took X s in total"
  std::optional<double> init_engine_seconds;     // "init engine (profile, create kv cache, warmup model) took X"
  std::optional<int64_t> encoder_cache_budget_tokens;
  std::optional<int64_t> encoder_cache_profile_items;
  std::string encoder_cache_profile_modality;  // "image", ... ("" when absent)
  std::optional<int64_t> graph_sizes_count;    // "... with N sizes" / "... -> N sizes"
  std::optional<double> gpu_memory_utilization;
  std::optional<int64_t> kv_error_max_seq_len;  // "max seq len (N) is larger than ... KV cache (M)"
  std::optional<int64_t> kv_error_max_kv_tokens;
  std::string vllm_version;  // "" when not printed

  bool ready = false;                        // "Application startup complete." or "Uvicorn running on" seen
  std::vector<std::string> readiness_lines;  // messages of the readiness markers seen, in order (first 50)

  std::vector<VllmEnvError> env_errors;         // in log order, the first 100
  std::map<std::string, LogEvidence> evidence;  // run-level field name -> its line
  int64_t line_count = 0;
};

// Never fails: text that is not a vLLM log gives an empty summary.
VllmLogSummary ParseVllmLog(std::string_view text);

// CLI contract of `npuprof inspect vllm-log FILE`:
// {"ranks": {prefix: {"weights_gib","weights_load_seconds","kv_cache_available_gib",
//                     "graph_capture_gib", + "graph_capture_count","memory_profile","evidence"}},
//  "weights_gib","kv_cache_available_gib","kv_cache_tokens","gpu_blocks",
//  "max_concurrency","graph_capture_gib","graph_capture_count","ready",
//  + "weights_load_seconds","cpu_blocks","max_concurrency_tokens_per_request",
//    "graph_capture_secs","compile_warmup_seconds","torch_compile_seconds",
//    "init_engine_seconds","encoder_cache_budget_tokens",
//    "encoder_cache_profile_items","encoder_cache_profile_modality",
//    "graph_sizes_count","gpu_memory_utilization","kv_capacity_error",
//    "vllm_version","ranks_differ","readiness_lines","env_errors",
//    "env_error_hint","evidence","line_count"}
// with null where absent. evidence values are {"line","text"}; env_errors
// entries are {"kind","line","text"}; kv_capacity_error is
// {"max_seq_len","kv_cache_max_tokens"} or null; memory_profile is null or an
// object with every VllmMemoryProfile field (null where not printed). Every
// string (and rank key) is made valid UTF-8 (common/utf8.h).
nlohmann::json VllmLogToJson(const VllmLogSummary& summary);

// The hint for an environment problem, naming what is missing; "" when
// `errors` is empty.
std::string EnvErrorHint(const std::vector<VllmEnvError>& errors);

}  // namespace npuprof::parsers
