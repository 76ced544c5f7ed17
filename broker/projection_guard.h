// GuardedProjection: a kind's projection (Summary, Manifest) built where no
// request's error boundary surrounds it: the summary a watch delivers to the
// watching run (Broker::DeliverWatch), the projections a verify captures
// (Broker::LaunchVerifies). Projections are pure, but one may throw on a run
// state it cannot read (a stored result or payload that does not decode, in a
// store another npuprof wrote): the exception becomes a JSON object naming it
// ({"projection_error": "..."}) and is logged, so the broker's loop goes on.
// Header-only; no I/O besides the log line.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace npuprof::broker {

template <class Build>
nlohmann::json GuardedProjection(std::string_view what, const std::string& run_id, Build&& build) {
  try {
    return build();
  } catch (const std::exception& e) {
    spdlog::error("the {} of run {} could not be built: {}", what, run_id, e.what());
    return nlohmann::json{{"projection_error", std::string(what) + " could not be built: " + e.what()}};
  }
}

}  // namespace npuprof::broker
