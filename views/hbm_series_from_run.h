// A memory-profile run's HBM series, phases and activation peaks for the
// views (views/hbm_series.h), from its event log and its stored npu_mem CSVs.
// Pure: the caller fetches the CSVs this names (NpuMemCsvsOfRun) and hands
// their bytes in; nothing here does I/O.
//
// Clock. msprof stamps npu_mem on the target's clock; the event log is on the
// server's. The inference window is the one the kind gave the collect step
// (statemachine/inference_window.h: the target's `date` readings around the
// request, else the server's times with a wider margin). Phases come from the
// event log and are moved onto the target clock by the offset the inference
// request measured (target window midpoint − server window midpoint) when the
// target's clock was read; otherwise they stay on the server's clock (the
// simulator's clock is the server's).
//
// A deployment over several machines (docs/MULTINODE.md "One clock"): every
// node's devices, each series labelled with its machine and cut at the window
// its own collect was given (on that node's clock). When the run's
// machine.clock measured offsets, every node's samples and peaks are moved
// onto npuprof's clock (timestamp − that node's offset_ms; a node without an
// offset is taken to be on the head's clock) and the phases with the head's;
// the set's clock is then "npuprof". Without any offset the set stays on the
// head's clock, as for one machine.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/inference_window.h"
#include "views/hbm_series.h"

namespace npuprof::views {

// One stored npu_mem CSV.
struct NpuMemCsv {
  std::string file;              // local name, e.g. "npu_mem_20250101000000.csv"
  std::string blob;              // its sha256
  std::optional<int> device_id;  // the device its PROF dir maps to (CSVs without a Device_id column)
  std::string text;              // its bytes (empty until fetched)
  std::string machine;           // the node it was collected on (a deployment); "" for one machine
};

// Most npu_mem CSVs the adapter reads of one run, and most bytes per CSV.
inline constexpr size_t kMaxNpuMemCsvs = 64;
inline constexpr size_t kMaxNpuMemCsvBytes = size_t{256} << 20;

// The npu_mem CSVs holding each device's "Device" series (the one the collect
// step measured the peak on), from the last memory.collect_csvs result in the
// log (of every node of a deployment, the head's first); at most
// kMaxNpuMemCsvs, text empty.
std::vector<NpuMemCsv> NpuMemCsvsOfRun(const nlohmann::json& events_doc);

// The inference window the activation peak is measured in: the collect task's
// "inference_window" when it has one, else chosen from the memory.infer
// task's result and its server times. nullopt when the log has neither.
std::optional<sm::ChosenWindow> InferenceWindowOfRun(const nlohmann::json& events_doc);

// µs to add to a server time to get the target's (0 without a target reading).
double TargetClockOffsetUs(const nlohmann::json& events_doc);

// The phases, in µs on the series' clock: baseline (the baseline npu-smi
// snapshot answered), launch (service.launch scheduled), ready
// (service.wait_ready answered), inference (the window the peak is measured
// in, not widened), stop (service.stop scheduled to answered).
std::vector<PhaseMarker> PhasesOfRun(const nlohmann::json& events_doc);

// Series (per device, the "Device" series with the most samples among `csvs`;
// unparseable CSVs are skipped), phases and each device's activation peak
// inside the run's inference window (statemachine/activation_peak.h).
HbmSeriesSet HbmSeriesSetFromRun(const nlohmann::json& events_doc, const std::vector<NpuMemCsv>& csvs);

}  // namespace npuprof::views
