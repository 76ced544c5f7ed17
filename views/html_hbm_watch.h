// `npuprof report SERVE_RUN --format html`: the HBM watch of a serve run
// (`serve --watch-hbm`, statemachine/serve_hbm_watch.h) as one
// self-contained page (views/html_page.h: inline CSS and SVG, no script).
//
// Input: the report document of views/hbm_watch_text.h
// (BuildHbmWatchReport: {run_id, status, state, hbm_watch}). The page shows
// the watch's figures (interval, samples, confidence, threshold, the run's
// verdict), then one card per device:
//  * the verdict as a badge: "steady" (green) or "growing: +X MB/h" (red),
//    with the confidence it was tested at and the slope's bounds;
//  * the kept samples (hbm_watch.recent, the last 120) over time, and the
//    fitted line over every sample (its slope and its value at the first
//    sample, fit_first_used_mb), drawn across the same time span;
//  * the fit's figures in a table (slope, standard error, bounds, samples,
//    first flagged at, first / last / total MB, MB per request under
//    --watch-workload).
// Errors: Status::Invalid when the document has no hbm_watch (the run took
// no samples). Pure: the same document and language give the same bytes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::views {

Result<std::string> RenderHbmWatchHtml(const nlohmann::json& report, const std::string& lang);

}  // namespace npuprof::views
