// The kernel part of a torch-profile compare: one rank position's kernel
// summaries (parsers/kernel_summary.h JSON, as each run's analyse task
// stored it) side by side. Pure.
//
// Rules (docs/COMPARE.md#kernels):
//  * summaries[i] is run i's summary at this position, or null when that run
//    has none (no rank there, no valid kernel_details.csv, or a read error:
//    "statuses"[i] says which).
//  * "total_us": the device time of every kernel of the rank, with deltas
//    against run A (views/compare_deltas.h).
//  * "by_type": every kernel Type any run lists, {"type", "count",
//    "total_us", "delta_us", "delta_pct"}; a Type a run's summary does not
//    list took 0 µs there (the by-Type table is complete up to its cap),
//    unless that run has no summary (null). Ordered by the largest
//    |delta_us| over the runs, then by type.
//  * "top_movers": kernels by (name, type) from the runs' top lists, at most
//    `max_movers`, ordered the same way. A run's top list holds only its
//    longest kernels, so a kernel absent from it is null there (not 0) and
//    "in_top"[i] is false.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::views {

nlohmann::json CompareKernelSummaries(const std::vector<nlohmann::json>& summaries, size_t max_movers = 10);

// "ok" | "no summary" | "error: <message>" for one stored summary slot.
std::string KernelSummaryStatus(const nlohmann::json& summary);

}  // namespace npuprof::views
