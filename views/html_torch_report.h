// The torch-profile run as one self-contained HTML page (see
// views/html_page.h). Pure: the same input gives the same bytes.
//
// Input: the manifest `npuprof manifest RUN` prints for a torch-profile (or
// analyse-root) run. The page shows the run's header (id, tag, model, tp,
// mode, status, error), both gates (workload: requests ok / total against
// the threshold, follow-up; analysis: the verdict over the ranks), the
// service and profiler-control steps, one row per rank directory with its
// analysis status and outputs, the cross-rank view (views/cross_rank.h:
// every rank of the deployment with its machine, device, device time,
// communication share, top kernel and deviation from the median; the slowest
// rank's row has class "slowest"), the workload's latency distribution (every
// request's latency sorted, p50 / p90 / p99, count, ok, min, max) and, per
// rank directory with a "kernel_summary" (parsers/kernel_summary.h), its
// kernel Types and longest kernels.
//
// lang "zh" (default) or "en" for the labels. Errors: `doc` is not an
// object, or has none of the manifest's fields (no "workload_status",
// "remote_profile_dirs" or "analysis_status").
#pragma once

#include <string>

#include "common/status.h"
#include "views/html_page.h"

namespace npuprof::views {

Result<std::string> RenderTorchProfileHtml(const json& manifest, const std::string& lang = "zh");

}  // namespace npuprof::views
