// Test data for the views (tests/data/views, saved from real runs over the
// simulated target; see its README) and the inputs built from it: the HBM
// series of a memory-profile run from its npu_mem CSV, its phases and
// inference window from its event log, the activation peak per device — what
// the CLI's adapter (cli/run_hbm_series.h) will do with a run's stored data.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "statemachine/activation_peak.h"
#include "views/hbm_series.h"

namespace npuprof::testing {

// A local file, whole ("" when missing).
std::string ReadFileBytes(const std::string& path);
// tests/data/<rel>, whole ("" when missing).
std::string ReadTestData(const std::string& rel);
// tests/data/<rel> parsed (null when missing or not JSON).
nlohmann::json TestJson(const std::string& rel);

// The inference request of a memory-profile run: its memory.infer task from
// TaskScheduled to TaskSucceeded, in µs; nullopt when the log has none.
std::optional<sm::InferenceWindow> InferenceWindowFromEvents(const nlohmann::json& events_doc);

// The phases of a memory-profile run from its event log, in µs: baseline
// (the baseline npu-smi snapshot), launch (service.launch scheduled), ready
// (service.wait_ready answered), inference (the memory.infer span), stop
// (service.stop scheduled to answered).
std::vector<views::PhaseMarker> PhasesFromEvents(const nlohmann::json& events_doc);

// The "Device" series of every device in an npu_mem CSV, the run's phases,
// and each device's activation peak inside the inference window.
views::HbmSeriesSet SeriesSetFromRun(const nlohmann::json& events_doc, const std::string& npu_mem_csv,
                                     const std::string& file, const std::string& blob);

}  // namespace npuprof::testing
