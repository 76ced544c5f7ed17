// Capture controls and the budget preflight of torch-profile
// (docs/BEHAVIOUR.md#tp-capture). Pure: no I/O.
//
// Capture flags name fields of vLLM's ProfilerConfig. A flag given is put
// into --profiler-config only once the capture check
// (torch_profile.capture_check, one remote command before the launch) found
// its field in the target's vLLM: a field the target lacks refuses the run
// before anything is launched, naming the flag and the field, never drops
// it. The same command reads the free disk under the runtime dir's nearest
// existing ancestor, MemAvailable and the model's layer count; the estimate
// below must fit both or the run is refused, naming both numbers.
//
// The estimate's rule (EstimateCapture):
//   steps     = (requests + 1) x ceil(prompt_tokens / max_num_batched_tokens)          prefill
//             + ceil(requests / min(concurrency, max_num_seqs)) x benchmark_output_tokens  decode
//             + followup_output_tokens
//               then the window: max(0, steps - delay_iterations), at most max_iterations
//   raw/rank  = steps x layers x 64 KiB x 3 (with_stack) x 1.5 (record_shapes) x 2 (profile_memory)
//   raw       = raw/rank x ranks on the machine
//   disk      = raw x 20 (the raw data and analyse()'s outputs, Ascend's guide)
//               x 1.5 when data_simplification is false (intermediate data kept)
//   memory    = raw/rank x 20 (one analyse() at a time, the guide's factor)
// layers: num_hidden_layers of the model's config.json (or its text_config);
// 64 when it could not be read (and the estimate says so).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "statemachine/run_state.h"
#include "run_specs.pb.h"
#include "task_results.pb.h"

namespace npuprof::sm {

// One capture flag: its submit flag, its spec field, the ProfilerConfig
// field it needs in the target's vLLM ("" for one that is not a
// ProfilerConfig field, i.e. analyse_export_type).
struct CaptureFlag {
  const char* flag;
  const char* spec_field;
  const char* config_field;
};
const std::vector<CaptureFlag>& CaptureFlags();

// Any capture flag given (the spec's optional fields 49-54).
bool HasCaptureFlags(const run_specs::TorchProfileSpec& spec);
// The capture check runs: a capture flag, or budget_check true.
bool CaptureCheckWanted(const run_specs::TorchProfileSpec& spec);
// The ProfilerConfig fields the given flags need, in CaptureFlags() order;
// torch_profiler_with_stack too when with_stack is true and a flag is given.
std::vector<std::string> RequiredProfilerFields(const run_specs::TorchProfileSpec& spec);

// The capture flags' --profiler-config entries, in a fixed order, appended
// after profiler, torch_profiler_dir and torch_profiler_with_stack.
void AddCaptureConfig(const run_specs::TorchProfileSpec& spec, json& profiler_config);

// The capture flags as the manifest records them: {"<spec field>": value or null}.
json CaptureFlagsRecord(const run_specs::TorchProfileSpec& spec);

// What the capture check's command printed, read (torch_profile.capture_check):
//   probe_dir <path>                the nearest existing ancestor of the runtime dir
//   disk_free_kb N / mem_available_kb N   as the listing's means lines
//   layers N                        the model's num_hidden_layers ("" unread)
//   profiler_fields <JSON array of strings> | profiler_fields_error <one line>
// (the last two only when the fields were asked for).
struct CaptureProbe {
  std::string probe_dir;
  std::optional<int64_t> disk_free_bytes;
  std::optional<int64_t> mem_available_bytes;
  std::optional<int64_t> layers;
  bool fields_read = false;
  std::vector<std::string> profiler_fields;
  std::string fields_error;  // why the fields could not be read
};
inline constexpr size_t kMaxCaptureProbeBytes = 64 * 1024;
inline constexpr size_t kMaxProfilerFields = 512;
// Invalid naming the line when the output is oversized, not UTF-8, or a
// line is malformed (profiler_fields not a JSON array of short names).
Result<CaptureProbe> ParseCaptureProbe(const std::string& out, bool fields_asked);

struct CaptureEstimate {
  int64_t steps = 0;
  int64_t layers = 0;
  bool layers_assumed = false;
  int64_t ranks = 0;
  int64_t raw_bytes_per_rank = 0;
  int64_t raw_bytes = 0;
  int64_t disk_bytes = 0;
  int64_t memory_bytes = 0;
  std::string rule;  // the numbers that made it, one line
};
inline constexpr int64_t kCaptureBytesPerLayerStep = 64 * 1024;
inline constexpr int64_t kAssumedLayers = 64;
CaptureEstimate EstimateCapture(const run_specs::TorchProfileSpec& spec, std::optional<int64_t> layers);

// The check's verdict from its result: refusal "" when the run may launch,
// else the error kind ("capture_unsupported" | "capture_budget") and the
// message naming the flag and field, or both numbers. `record` is the
// CaptureChecked event's payload.
struct CaptureVerdict {
  std::string error_kind;
  std::string error;
  json record;
};
CaptureVerdict JudgeCapture(const run_specs::TorchProfileSpec& spec,
                            const results::TorchProfileCaptureCheckResult& result);

// After the listing: the raw size measured against the estimate; "" when
// within it or unknown, else a sentence for the summary.
std::string CaptureOutgrewEstimate(int64_t estimate_raw_bytes, int64_t measured_raw_bytes);

}  // namespace npuprof::sm
