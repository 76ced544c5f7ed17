// Test data for the views (tests/data/views, saved from real runs over the
// simulated target; see its README) and the inputs built from it with the
// product's adapter (views/hbm_series_from_run.h): the HBM series of a
// memory-profile run from its npu_mem CSV, its phases and the activation peak
// per device.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "views/hbm_series.h"

namespace npuprof::testing {

// A local file, whole ("" when missing).
std::string ReadFileBytes(const std::string& path);
// tests/data/<rel>, whole ("" when missing).
std::string ReadTestData(const std::string& rel);
// tests/data/<rel> parsed (null when missing or not JSON).
nlohmann::json TestJson(const std::string& rel);

// What the CLI's adapter (cli/run_hbm_series.h) gives the views for a saved
// run: views::HbmSeriesSetFromRun on its event log and one npu_mem CSV
// (`file` its local name under msprof_csvs/, `blob` its sha256).
views::HbmSeriesSet SeriesSetFromRun(const nlohmann::json& events_doc, const std::string& npu_mem_csv,
                                     const std::string& file, const std::string& blob);

}  // namespace npuprof::testing
