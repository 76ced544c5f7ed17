// The cross-rank view of a torch-profile (or analyse-root) run: one row per
// rank directory of the whole deployment, every node's, with how much device
// time it spent, how much of it was communication, its longest kernel and how
// far it is from the median rank; the slowest rank named. The first question
// asked of a multi-node trace ("which rank holds the others up?"); one-node
// runs get it too (every rank of one machine). Pure: a projection of the
// manifest `npuprof manifest RUN` prints, over the per-rank kernel summaries
// the analyse step recorded (parsers/kernel_summary.h); nothing is read or
// recomputed from the target.
//
// JSON (`cross_rank` in `npuprof report RUN --format json`):
//   {"ranks": [{"machine", "device_id", "rank_dir", "path", "analysis_status",
//               "device_time_us", "comm_us", "comm_share_pct",
//               "top_kernel": {"name", "type", "total_us", "share_pct"} | null,
//               "deviation_from_median_pct", "deviation_from_median_us",
//               "note"?}],
//    "ranks_with_summary", "median_device_time_us",
//    "slowest": {"machine", "device_id", "rank_dir", "device_time_us",
//                "deviation_from_median_pct"} | null}
// * machine: the dir's `machine` (multi-node runs), else the run's machine;
//   device_id: the analyse step's `device_id` (PROF_*/device_N), else null.
// * device_time_us: the summary's total_us (the sum of every kernel's
//   Duration); comm_us: the by-Type rows of communication kernels (HCCL:
//   Accelerator Core "HCCL", or a Type starting with "hcom" or "hccl", any
//   case); comm_share_pct = comm_us / device_time_us × 100.
// * The median is over the ranks with a summary (the mean of the two middle
//   values for an even count); deviation = (device time − median) / median ×
//   100 (null when the median is 0). A rank without a summary (no
//   kernel_details, or its summary failed) has nulls and a `note` saying why,
//   and takes no part in the median nor the slowest.
// * slowest: the rank with the most device time (the first in the listing
//   order on a tie); null when no rank has a summary.
// Rows keep the manifest's order (the head's ranks first, then each node's).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::views {

nlohmann::json CrossRankView(const nlohmann::json& manifest);

// The view as text (a table, the median and the slowest rank); lang "zh"
// (default) or "en".
std::string RenderCrossRankText(const nlohmann::json& cross_rank, const std::string& lang = "zh");

// True for a kernel Type (and the Accelerator Core of its rows) that is
// communication (HCCL).
bool IsCommunicationType(const std::string& type, const std::string& core);

}  // namespace npuprof::views
