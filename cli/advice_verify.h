// What `npuprof advise RUN` adds to the run's advice (statemachine/
// memory_advice.h): whether the sweep that tests a finding's remedy measured
// what the finding predicted. Pure: the CLI fetches the manifests, these
// functions judge and render. The verification survives a server restart:
// it is read again from the stored runs each time (the sweep's spec carries
// the advice it verifies, its children carry the measurements).
//
// Verification of one finding (json, under finding.verification):
//   {"sweep": "<id>", "status": "not_run" | "running" | "ok" | "failed" |
//    "cancelled" | "mismatch_advice", "matched": true | false | null,
//    "tolerance_pct": 1.0,
//    "points": [{"run_id", "status", "gpu_memory_utilization",
//                "predicted_kv_tokens", "measured_kv_tokens", "diff_pct",
//                "predicted_kv_cache_mb", "measured_kv_cache_mb",
//                ["env", "predicted_hccl_mb", "measured_hccl_mb", "hccl_diff_pct"],
//                "matched"}]}
// matched: every point measured its KV tokens within tolerance_pct of the
// prediction (kv_cache_mb when the prediction has no tokens) and, when the
// prediction has hccl_mb (hccl_buffers_large), its HCCL component within
// tolerance_pct too; null while the sweep has not ended or never ran.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::cli {

using json = nlohmann::json;

inline constexpr double kAdviceTolerancePct = 1.0;

// The measured KV tokens and KV cache MB of a memory-profile manifest's
// device (its report's kv_cache component and its kv_cache_tokens evidence).
struct KvMeasured {
  std::optional<int64_t> tokens;
  std::optional<double> kv_cache_mb;
  std::optional<double> hccl_mb;  // the report's hccl component (msprof)
};
KvMeasured MeasuredKv(const json& child_manifest, int64_t device);

// finding: one of the advice's findings; sweep_manifest: the sweep's
// manifest or null when it does not exist; children: each child's manifest
// (by run id; null when not available yet).
json VerifyFinding(const json& finding, const std::string& run_id, const json& sweep_manifest,
                   const std::vector<json>& children);

// The advice as people read it: one block per finding (a screenful).
std::string RenderAdviceText(const json& advice);

}  // namespace npuprof::cli
