// The explicit inputs of the views besides the JSON the server serves: the
// HBM series of a run's devices (msprof npu_mem), the phases of the run and
// the activation peak per device. Plain data; one adapter fills them from a
// run (the npu_mem CSVs it stored, its event log) — the views never look
// anything up themselves.
//
// Times are microseconds on one clock for everything a view is given
// (`HbmSeriesSet::clock`: msprof writes target-clock µs since the epoch; the
// adapter puts phases on the same clock, and a deployment's nodes on
// npuprof's). Charts show seconds from `origin_us`.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace npuprof::views {

struct HbmSample {
  double t_us = 0;
  double mb = 0;
  size_t row = 0;  // 1-based data row of the CSV it came from (0 = unknown)
};

// One device's HBM over time, from one CSV.
struct DeviceHbmSeries {
  int device_id = 0;
  std::string machine;  // the node's machine in a deployment over several machines; "" for one machine
  std::string event;  // npu_mem event: "Device" (device level) or "APP" (process level)
  std::string file;   // e.g. "msprof_csvs/npu_mem_20250101000000.csv"
  std::string blob;   // sha256 of the stored CSV
  std::vector<HbmSample> samples;
};

// A phase of the run: a point in time (end unset) or a span.
// Keys: baseline, launch, ready, inference, stop (labels come from the view).
struct PhaseMarker {
  std::string key;
  double start_us = 0;
  std::optional<double> end_us;
};

// The activation peak of one device as measured on its series.
struct PeakMarker {
  int device_id = 0;
  std::string machine;  // as DeviceHbmSeries::machine
  double t_us = 0;     // time of the highest sample in the inference window
  double peak_mb = 0;  // that sample
  double base_mb = 0;  // the level just before the window
  double delta_mb = 0;  // what the report counts as activation peak
};

struct HbmSeriesSet {
  // "target": the run's target's clock (one machine; the trace moves it onto
  // the server's by the inference's measure of the difference);
  // "npuprof": npuprof's host clock (a deployment whose clocks machine.clock
  // measured: each node's samples minus its offset, the server's times as
  // they are).
  std::string clock = "target";
  std::vector<DeviceHbmSeries> series;
  std::vector<PhaseMarker> phases;
  std::vector<PeakMarker> peaks;
  std::optional<double> origin_us;  // unset: the earliest sample or phase
};

}  // namespace npuprof::views
