// `npuprof report RUN` (json and text) for torch-profile and analyse-root
// runs: the gates and, per rank, the outputs and the kernel summary
// (parsers/kernel_summary.h). A projection of the manifest `npuprof manifest
// RUN` prints; pure, no I/O.
//
// JSON: {"kind", "run_id", "status", "workload_status", "analysis_status",
//  "rank_count", "expected_ranks", "remote_profile_root", "ranks": [{"path",
//  "analysis_status", "outputs", "kernel_summary"}], "cross_rank"} (fields a
//  manifest lacks are null; cross_rank: views/cross_rank.h, every rank of the
//  deployment side by side). Text: the same, the cross-rank table first,
//  then each rank's Types and its longest kernels (at most `top` of them) as
//  tables. lang "zh" (default) or "en".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::views {

// Errors: not an object, or none of the torch manifest's fields.
Result<nlohmann::json> BuildTorchReport(const nlohmann::json& manifest);
std::string RenderTorchReportText(const nlohmann::json& report, const std::string& lang = "zh", size_t top = 10);

}  // namespace npuprof::views
