// The evidence of a memory-profile run as typed messages, decoded once from
// the report's input (memory_report.h: the run's data as the machine folds
// it) plus the run's settings and its model's config. Pure.
//
// Contract: DecodeMemoryEvidence reads every document the advice rules use
// (npu-smi snapshots with their processes, the vLLM log summary, the msprof
// component maxima and activation peaks, the safetensors attribution, the
// model config, the spec's settings). The evidence documents are decoded by
// the report's decoder (memory_report_input.h), the only one, each on its
// own: a document that is absent stays absent (`present` false, or an empty
// optional); a document with a field of the wrong shape is absent too and
// its error, naming the path and the shape ("evidence.vllm_log.summary.
// kv_cache_available_gib must be a number, not a string"), is listed in
// `errors` (so are a malformed model config or component table); the other
// documents still serve their rules. Only an input that is not an object or
// a malformed spec fails the whole decode. Nothing is defaulted silently: a
// renamed key is an absent value, which a rule reports as missing evidence,
// never as a finding.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "statemachine/memory_report_input.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

// Where a value was read: {blob, file, line | device | row, text}.
struct EvidenceRef {
  std::string blob, file;
  std::string field;               // what was read ("used_mb", "kv_cache_available_gib", ...)
  std::optional<int64_t> line;     // a log line (1-based)
  std::optional<int64_t> device;   // an npu-smi device (logical id)
  std::optional<int64_t> row;      // a CSV row
  std::string text;                // the log line's text
  std::optional<double> value;     // the value read, as the source gave it
  json ToJson() const;
};

struct NpuProcessSeen {
  int64_t pid = 0;
  std::string name;
  int64_t memory_mb = 0;
};

struct HbmDeviceSnapshot {
  std::optional<double> used_mb, total_mb;
  bool process_table = false;  // npu-smi printed a process table for this snapshot
  std::vector<NpuProcessSeen> processes;
};

// One npu-smi snapshot (baseline, after_ready, after_infer).
struct NpuSmiEvidence {
  bool present = false;
  std::string source;  // "npu_smi" | "baseline_run" | "baseline_file"
  std::string blob, file;
  std::map<int64_t, HbmDeviceSnapshot> devices;
  EvidenceRef Ref(int64_t device, const char* field, std::optional<double> value) const;
};

struct LogLine {
  int64_t line = 0;
  std::string text;
};

// The vLLM log summary (parsers/vllm_log_parser.h VllmLogToJson), run level.
struct VllmLogEvidence {
  bool present = false;
  std::string blob, file;
  std::optional<double> weights_gib, kv_cache_available_gib, graph_capture_gib, gpu_memory_utilization;
  std::optional<int64_t> kv_cache_tokens, gpu_blocks;
  std::map<std::string, LogLine> lines;  // field -> its line
  EvidenceRef Ref(const std::string& field, std::optional<double> value) const;
};

struct MsprofComponentMax {
  std::optional<int64_t> device_id;  // nullopt: process-level CSV
  std::string component, file, blob;
  double max_mb = 0;
  int64_t row = 0;
};

struct ActivationPeakEvidence {
  int64_t device_id = 0;
  bool ok = false;
  std::optional<double> value_mb;
  std::string file, blob;
};

struct MsprofEvidence {
  std::string status;  // "ok", "not_collected", ...
  std::vector<MsprofComponentMax> module_mem;
  std::vector<ActivationPeakEvidence> activation_peaks;
  // The largest max of `component` for `device` (device-mapped rows first,
  // else process-level ones), as memory_report.cc picks it.
  const MsprofComponentMax* Max(const std::string& component, int64_t device) const;
};

struct WeightsEvidence {
  bool present = false;
  std::string blob, file;
  std::optional<double> per_device_bytes, total_bytes;
};

// What the KV bytes per token follow from (config.json of the model).
struct ModelConfigEvidence {
  bool present = false;
  std::string blob;
  std::optional<int64_t> num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, hidden_size,
      kv_lora_rank, qk_rope_head_dim;
  std::optional<int64_t> full_attention_layers;  // layer_types entries "full_attention", when listed
  std::string torch_dtype;
};

// The run's settings (its spec, as validated).
// One node of a multi-node run as its spec names it: the machine and the
// NPUs asked for there (empty: npuprof picked free ones).
struct NodeSetting {
  std::string machine;
  std::vector<int64_t> devices;
};

struct RunSettings {
  std::string run_id, machine, mode, model;
  std::optional<double> gpu_memory_utilization;
  int64_t tp = 1, dp = 1;
  std::optional<int64_t> max_model_len, max_tokens;
  std::vector<int64_t> devices;
  bool enforce_eager = false, enable_expert_parallel = false, multi_node = false;
  std::optional<std::string> compilation_config, speculative_config, additional_config, quantization;
  std::vector<std::string> extra_args;  // after "--"
  std::map<std::string, std::string> env;  // the service's extra environment (spec.env)
  std::optional<int64_t> kv_cache_memory;  // vLLM's --kv-cache-memory, bytes per device
  // A multi-node run (multi_node): its nodes, head first, and the
  // data-parallel address and RPC port its spec gave (absent: npuprof's).
  std::vector<NodeSetting> nodes;
  std::optional<std::string> dp_address;
  std::optional<int64_t> dp_rpc_port;
};

struct MemoryEvidence {
  RunSettings settings;
  std::string status;  // the run's status: "ok", "failed", ...
  NpuSmiEvidence baseline, after_ready, after_infer;
  VllmLogEvidence vllm_log;
  MsprofEvidence msprof;
  WeightsEvidence weights, theory;
  ModelConfigEvidence model_config;
  // The report's component values (memory_report.h keys) per device id.
  std::map<int64_t, std::map<std::string, double>> components_mb;
  // The documents that failed to decode (absent above): the advice's
  // "evidence_errors"; the rules that need them make no finding.
  std::vector<ReportEvidenceError> errors;
};

// Decodes the advice input {"run_id","status","machine","spec","evidence",
// "model_config","components_mb"} (MemoryAdviceInput). Errors name the path
// and the shape.
Result<MemoryEvidence> DecodeMemoryEvidence(const json& input);

// The advice input of a run: its report input (MemoryEvidenceFromState),
// its spec's settings, its model config and the report's component values
// per device (BuildMemoryReport's output), as DecodeMemoryEvidence reads it.
json MemoryAdviceInput(const RunState& s, const json& report_evidence, const json& report);

}  // namespace npuprof::sm
