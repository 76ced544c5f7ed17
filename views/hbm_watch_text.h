// `npuprof report SERVE_RUN`: the HBM watch of a serve run (`serve
// --watch-hbm`, statemachine/serve_hbm_watch.h) for people and as JSON.
// Pure: the same summary and language give the same text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::views {

// The report document: {run_id, status, state, hbm_watch} from a serve run's
// manifest (its summary); Status::Invalid naming the run when it took no
// samples (no --watch-hbm).
Result<nlohmann::json> BuildHbmWatchReport(const nlohmann::json& manifest);

// One line per device: "device D: steady | growing: +X MB/h (slope S MB/h,
// 99.999 % bound [L, U], N samples, first flagged at sample K)", then the
// first and last reading. lang "zh" (default) or "en" for the labels.
std::string RenderHbmWatchText(const nlohmann::json& report, const std::string& lang = "zh");

}  // namespace npuprof::views
