// The memory-profile report: a pure projection of the evidence a
// memory-profile run recorded in its events. No I/O, no clock: the same input
// always gives the same bytes.
//
// Input (`evidence`, the run's data as folded by MemoryProfileMachine; every
// field optional, missing = that source is unavailable):
//   "mode": "standalone" | "attach",  "tp", "dp", "devices": [logical ids],
//   "baseline":    {"hbm": {"<dev>": {"used_mb","total_mb"}}, "source":
//                   "npu_smi" | "baseline_run" | "baseline_file", "origin",
//                   "blob", "file"}
//   "after_ready", "after_infer": {"hbm": {...}, "blob", "file"}
//   "vllm_log":    {"summary": VllmLogToJson(...), "blob", "file"}
//   "msprof":      {"status": "ok" | "export_timeout" | "export_failed" |
//                   "not_wrapped" | "not_collected" | ..., "module_mem": [
//                   {"file","blob","prof_dir","component","device_id"|null,
//                    "max_mb","row","raw","timestamp","scope"}],
//                   "npu_mem": [{"file","blob","device_id"|null,"event",
//                    "max_hbm_mb","row"}],
//                   "activation_peaks": [{"device_id","file","blob","clock",
//                    ActivationPeakToJson fields}]}  (statemachine/activation_peak.h)
//   "weights":     {"per_device_bytes","total_bytes","categories":[...],
//                   "blob","file","tp","dp","ep","expert_parallel"}
//   "theory":      {"per_device_bytes", ...}
//   "machine":     the machine the devices are on (each device entry then
//                  carries it beside device_id)
//   "rank_offset": the world rank of the first device (a node of a
//                  multi-node deployment: node * dp_local * tp), for the
//                  vLLM log's per-rank lines
//   "nodes":       a deployment over several machines: every other node's
//                  evidence, each {"node", "machine", "rank_offset",
//                  "devices", ...} as above; the report is then the nodes'
//                  reports put together (memory_deployment_report.h)
//
// Rules (docs/BEHAVIOUR.md#mem-components, #mem-residual): fixed overhead = baseline used; weights =
// vLLM log > safetensors per-device > unavailable, others as corroboration;
// KV cache and graph capture from the vLLM log; HCCL / RUNTIME / SLOG = max
// of that msprof component; other msprof components summed when > 0.5 MB;
// activation peak = the device's msprof series peak (source "series":
// highest npu_mem Device sample inside the inference window minus the level
// just before it) when the collect step measured one, the npu-smi delta
// max(0, after_infer - after_ready) beside it as corroboration; else that
// delta (source "npu_smi_delta"); residual = the HBM the components add up
// to — after_ready + the series peak ("hbm_used_phase": "inference_peak") or
// the npu-smi after_infer snapshot — minus every other available component
// (labelled "msprof data missing" without msprof, never split). Nothing is
// estimated.
#pragma once

#include <optional>
#include <string>

#include "statemachine/run_state.h"

namespace npuprof::sm {

// Stable component keys in report order.
inline constexpr const char* kMemComponentKeys[] = {
    "fixed_overhead", "weights",         "kv_cache", "graph_capture", "hccl",
    "runtime",        "slog",            "msprof_other", "activation_peak", "residual"};

// Components of npu_module_mem given their own line (the rest is "other").
bool IsNamedMsprofComponent(const std::string& component);
// Other msprof components are counted when their max exceeds this.
inline constexpr double kMsprofOtherMinMb = 0.5;

// vLLM rank index from a process prefix of the log ("Worker_TP1 pid=7" -> 1,
// "Worker_DP1_TP0 pid=7" with tp=2 -> 2, "VllmWorker rank=3 pid=7" -> 3,
// "" -> 0); nullopt when the prefix names no rank.
std::optional<int> RankFromLogPrefix(const std::string& prefix, int tp);

// Builds the report document (see the "devices" / "components" layout in
// memory_report.cc's header comment and docs/BEHAVIOUR.md#mem-report).
json BuildMemoryReport(const json& evidence);

}  // namespace npuprof::sm
