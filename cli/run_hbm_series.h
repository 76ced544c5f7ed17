// The HBM series, phases and activation peaks of a run for the views
// (`npuprof trace`, `npuprof report --format html`): the one adapter from a
// run's stored data to views::HbmSeriesSet. It reads the run's event log,
// fetches the npu_mem CSVs that log names (the "Device" series of each
// device the memory-profile kind measured its activation peak on; at most
// views::kMaxNpuMemCsvs, each at most views::kMaxNpuMemCsvBytes) and hands
// both to views/hbm_series_from_run.h, which does the rest without I/O.
// A run of another kind, or one without msprof data, gives an empty set; a
// CSV the server cannot give is left out (the page then says that device has
// no series).
#pragma once

#include <string>

#include "cli/client.h"
#include "views/hbm_series.h"

namespace npuprof::cli {

// events_doc: what the server's "events" verb answered for the run.
views::HbmSeriesSet RunHbmSeries(Client& client, const json& events_doc);

}  // namespace npuprof::cli
