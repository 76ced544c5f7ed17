// The compare of stored runs (`npuprof compare RUN_A RUN_B [RUN_C ...]`): a
// pure projection of their manifests (what `npuprof manifest RUN` prints).
// No I/O, no clock: the same manifests in the same order give the same JSON.
// Nothing is recomputed from raw evidence; every value is read from its
// run's manifest or report and keeps that run's evidence reference.
//
// Rules (docs/COMPARE.md):
//  * 2 or more runs, all of one kind: memory-profile or torch-profile. Every
//    run must be final (status not "running"); a memory-profile run must
//    carry a report with a "devices" array. Anything else is refused with
//    Code::kInvalidArgument naming the runs and what to do.
//  * Run A (the first) is the reference: for every value, delta_mb[i] (or
//    delta[i]) = value of run i - value of run A, delta_pct[i] = that delta
//    / value of A * 100. Both arrays are aligned with "runs" (entry 0 is 0
//    for run A itself); an entry is null when either value is missing or
//    (delta_pct) A's value is 0.
//  * torch-profile's "node_machines" is derived: a multi-node run's machines
//    in node order (manifest "nodes"), a one-node run's [machine].
//  * config_diff: every configuration field (kMemoryConfigFields /
//    kTorchConfigFields below) whose JSON value is not equal in every run
//    (1 and 1.0 are equal; a missing field reads as null; in
//    served_model_name the run's own id reads as "<run id>", so npuprof's
//    default name npuprof-mem-<run id> is one choice), as
//    {"field", "values": [one per run]}. Fields equal in all runs are left
//    out; "same_fields" lists them.
//  * memory-profile devices are matched by rank position: position i is the
//    i-th device of each report in rank order (the report's "rank" field,
//    else its order). A position a run does not have (tp=2 vs tp=4) holds
//    null in that run's slot of device_ids and of every value.
//    Per position: every component key of the report (sm::kMemComponentKeys,
//    then any other key a report carries) as {"key", "label_zh",
//    "label_en", "values_mb", "delta_mb", "delta_pct", "sources",
//    "statuses", "evidence": [that run's evidence array | null], "notes"};
//    a value missing in a run is null there (its delta null) and "notes"
//    says which run lacks it and why (the report's own note when it has
//    one). Then "kv_cache_tokens" {"values", "delta", "delta_pct",
//    "evidence"}, "hbm_used_mb" and "hbm_total_mb" {"values_mb",
//    "delta_mb", "delta_pct", "phases"}.
//  * memory-profile totals: per run the sum over its devices of each
//    component, of hbm_used_mb and of hbm_total_mb ("device_counts" says
//    how many devices each run has); a run whose devices all lack a value
//    is null there; "incomplete" names the runs whose sum misses a device.
//  * torch-profile: "benchmark" rows (requests total/ok/failed, success
//    rate, latency min/mean/p50/p90/p99/max in ms by nearest rank, the
//    completion tokens the responses report, the wave's wall time and
//    from it ok requests / s and output tokens / s) from each run's
//    benchmark_results and benchmark_wall_ms; "gates" (workload gate, analysis gate, ranks found
//    / expected) side by side with "same": true when every run agrees; and
//    "ranks" matched by position in the deployment (node index, rank within
//    the node: views/torch_rank_positions.h), never by the directory's
//    name: per row "node", "rank_in_node", each run's "machines", and, when
//    a run lacks the position, "only_in" (the runs that have it) and a note
//    naming the run and its shape (also in the top-level notes);
//    "rank_shapes" gives each run's nodes and ranks per node. Per run the path,
//    analysis status and, per output (kernel_details.csv, trace_view.json),
//    whether it exists and its size in bytes with deltas; and "kernels",
//    the rank's kernel summaries compared (views/kernel_compare.h: total
//    device time, every kernel Type, the top movers by |delta|).
//
// Output: {"schema_version": 1, "kind", "runs": [{"run_id", "status",
//  "tag", "machine", "model", "tp", "dp", "started_at", "completed_at"}],
//  "reference_run", "config_diff", "same_fields", then "devices" and
//  "totals" (memory-profile) or "benchmark", "gates" and "ranks"
//  (torch-profile), and "notes"}.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::views {

// Configuration fields compared per kind (manifest field names).
inline constexpr const char* kMemoryConfigFields[] = {
    "machine", "model", "served_model_name", "mode", "tp", "dp", "devices", "gpu_memory_utilization",
    "max_model_len", "enable_expert_parallel", "enforce_eager", "speculative_config", "compilation_config",
    "additional_config", "quantization", "max_tokens", "image_url", "msprof_mem_freq", "attach_run",
    "baseline_run", "serve_args", "vllm_version"};
inline constexpr const char* kTorchConfigFields[] = {
    "machine", "model", "served_model_name", "tp", "dp", "mode", "request_kind", "speculative_tokens",
    "speculative_method", "enable_expert_parallel", "api_server_count", "torch_profiler_with_stack",
    "prompt_tokens", "benchmark_output_tokens", "followup_output_tokens", "benchmark_total_requests",
    "benchmark_concurrency", "benchmark_success_threshold", "expected_ranks", "serve_args", "vllm_version",
    "node_machines", "dp_local"};

// manifests: one per run, in the order given (the first is run A).
Result<nlohmann::json> BuildRunCompare(const std::vector<nlohmann::json>& manifests);

}  // namespace npuprof::views
