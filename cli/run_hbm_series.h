// The HBM series, phases and activation peaks of a run for the views
// (`npuprof trace`, `npuprof report --format html`): the one adapter from a
// run's stored data to views::HbmSeriesSet.
//
// Today it returns an empty set for every run: the memory-profile kind keeps
// only the maximum of each npu_mem series in its events, and the inference
// window is on the server's clock, not the target's. Once the kind records
// its series (the npu_mem CSV blobs, parsed) and the window on the target
// clock as typed results, this fills `series` (parsers/msprof_csv_parser:
// the "Device" event per device), `phases` (baseline, launch, ready,
// inference, stop) and `peaks` (statemachine/activation_peak) — the views
// need no change.
#pragma once

#include <string>

#include "cli/client.h"
#include "views/hbm_series.h"

namespace npuprof::cli {

views::HbmSeriesSet RunHbmSeries(Client& client, const std::string& run_id, const json& manifest);

}  // namespace npuprof::cli
