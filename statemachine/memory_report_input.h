// The input of the memory report (memory_report.h: the run's data as
// MemoryProfileMachine folds it) as typed documents, decoded once. Pure.
//
// The one decoder of a memory-profile run's evidence documents: the report
// reads them here, and so does the advice (memory_evidence.h builds its
// typed evidence from this input).
//
// Contract: DecodeMemoryReportInput never fails as a whole: every document
// (baseline, after_ready, after_infer, vllm_log, msprof, weights, theory and
// the node's own settings) is decoded on its own with a Status. A document
// that is absent stays absent (`present` false); a document that is there
// with a field of the wrong shape is `failed`: nothing of it is used (no
// figure comes from it, never a silent 0) and its error names the path and
// the shape ("vllm_log.summary.kv_cache_available_gib must be a number, not
// a string"), listed in `errors` for the report's "evidence_errors". A
// renamed key is an absent value. `path_prefix` ("nodes[1].") is put before
// every path (the other nodes of a multi-node deployment).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/run_state.h"

namespace npuprof::sm {

struct ReportEvidenceError {
  std::string document;  // "vllm_log", "msprof", "nodes[1].baseline", "settings", ...
  std::string message;   // names the field's path and the shape it should have
  // {"document", "path": the field's path (the message's first word), "message"}.
  json ToJson() const;
};

// Whether a document is there and decoded.
struct InputDoc {
  bool present = false;
  std::string error;  // non-empty: failed to decode, nothing of it is used
  bool failed() const { return !error.empty(); }
  bool usable() const { return present && error.empty(); }
};

// A process npu-smi listed on a device ({"pid", "name", "memory_mb"}; an
// entry without a pid names no process and is skipped).
struct NpuProcessInput {
  int64_t pid = 0;
  std::string name;
  int64_t memory_mb = 0;
};

struct HbmReading {
  std::optional<double> used_mb, total_mb;
  bool process_table = false;  // the snapshot carries npu-smi's process table for this device
  std::vector<NpuProcessInput> processes;
};

// An npu-smi snapshot: {"hbm": {"<dev>": {"used_mb","total_mb"}}, "source",
// "origin", "blob", "file"}.
struct SnapshotInput : InputDoc {
  std::optional<std::string> source, origin, blob, file;
  std::map<int64_t, HbmReading> hbm;
  std::optional<double> Used(int64_t dev) const;
  std::optional<double> Total(int64_t dev) const;
};

// A log line cited for a field ({"line","text"} under "evidence").
struct LogCite {
  std::optional<int64_t> line;
  std::optional<std::string> text;
};

// The memory figures of the vLLM log, run level or one rank's.
struct LogFigures {
  std::optional<double> weights_gib, kv_cache_available_gib, graph_capture_gib;
  std::map<std::string, LogCite> evidence;  // field -> its line
  std::optional<double> Get(const std::string& field) const;
};

// {"summary": VllmLogToJson(...), "blob", "file"}.
struct VllmLogInput : InputDoc {
  std::optional<std::string> blob, file;
  LogFigures run;
  std::optional<double> kv_cache_tokens, gpu_memory_utilization;
  std::optional<int64_t> graph_capture_count, gpu_blocks;
  std::vector<std::pair<std::string, LogFigures>> ranks;  // log prefix -> figures, in key order
};

struct ModuleMemRow {
  std::optional<int64_t> device_id;  // nullopt: process-level CSV
  std::string component, file, blob, prof_dir, raw, timestamp;
  double max_mb = 0;
  int64_t row = 0;
};

struct NpuMemRow {
  std::optional<int64_t> device_id;
  std::string event, file, blob;
  std::optional<double> max_hbm_mb;  // required on "APP" rows
  int64_t row = 0;
};

// msprof.activation_peaks[i] (statemachine/activation_peak.h's evidence form).
struct SeriesPeakInput {
  int64_t device_id = 0;
  bool ok = false;
  std::string file, blob, event = "Device", reason, message;
  std::optional<std::string> clock;
  std::optional<double> value_mb, peak_mb, base_mb;
  std::optional<int64_t> peak_row;
  std::vector<int64_t> base_rows, window_rows;
  json window;  // {"start_us","end_us"} numbers, cited verbatim; null when absent
};

struct MsprofInput : InputDoc {
  std::optional<std::string> status;
  std::vector<ModuleMemRow> module_mem;
  std::vector<NpuMemRow> npu_mem;
  std::vector<SeriesPeakInput> activation_peaks;
};

struct WeightCategoryInput {
  std::string category, display_name;
  int64_t tensor_count = 0;
  double total_bytes = 0, per_device_bytes = 0, share_of_per_device = 0;
  std::vector<std::string> dtypes, shard_strategies;
};

// The safetensors attribution (and the config theory, same shape).
struct WeightsInput : InputDoc {
  std::optional<std::string> blob, file;
  std::optional<double> per_device_bytes, total_bytes;
  std::optional<int64_t> tp, dp, ep;
  std::vector<WeightCategoryInput> categories;
};

// One node's report input.
struct MemoryReportInput {
  std::string mode = "standalone";
  int64_t tp = 1, dp = 1, rank_offset = 0;
  std::optional<std::string> machine;
  std::vector<int64_t> devices;  // empty: the devices the snapshots name
  SnapshotInput baseline, after_ready, after_infer;
  VllmLogInput vllm_log;
  MsprofInput msprof;
  WeightsInput weights, theory;
  std::vector<ReportEvidenceError> errors;
};

MemoryReportInput DecodeMemoryReportInput(const json& evidence, const std::string& path_prefix = "");

// One npu-smi snapshot document, parent[key], decoded the same way (the
// manifest's baseline_hbm, after_ready_hbm, ...); a failure is appended to
// `errors` and leaves the snapshot `failed`.
SnapshotInput DecodeSnapshotDoc(const json& parent, const char* key, const std::string& path_prefix,
                                std::vector<ReportEvidenceError>& errors);

}  // namespace npuprof::sm
