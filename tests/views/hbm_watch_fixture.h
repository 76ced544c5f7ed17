// A serve run's HBM watch report document (views/hbm_watch_text.h
// BuildHbmWatchReport shape) folded by the product's own fold
// (statemachine/serve_hbm_watch.h) from known samples, for the view tests:
// device 0 leaks exactly `leak_mb_per_sample` MB per sample, device 1 holds
// still; samples `interval_s` apart.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/run_state.h"
#include "statemachine/serve_hbm_watch.h"

namespace npuprof::testing {

inline nlohmann::json HbmWatchReportDoc(int samples, int64_t leak_mb_per_sample, int64_t interval_s,
                                        const std::string& run_id = "serve-1") {
  sm::RunState s;
  for (int i = 1; i <= samples; ++i)
    sm::ApplyHbmSampled(s, {{"sample_no", i},
                            {"t_ms", 1'700'000'000'000 + int64_t{i} * interval_s * 1000},
                            {"clock", "target"},
                            {"requests", 0},
                            {"devices", {{{"device_id", 0}, {"used_mb", 30000 + i * leak_mb_per_sample}, {"total_mb", 65536}},
                                         {{"device_id", 1}, {"used_mb", 31000}, {"total_mb", 65536}}}}});
  return {{"run_id", run_id},
          {"status", "running"},
          {"state", "ready"},
          {"hbm_watch", sm::HbmWatchSummary(s, static_cast<double>(interval_s))}};
}

}  // namespace npuprof::testing
