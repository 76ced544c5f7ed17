// The memory-profile report as one self-contained HTML page (see
// views/html_page.h for what "self-contained" promises). Pure: the same
// input gives the same bytes.
//
// Input `doc` is what the server already serves, either of
//   * the JSON `npuprof report RUN --format json` prints (the report with
//     "run_id" and "status" added), or
//   * the manifest `npuprof manifest RUN` prints (the report under "report",
//     run_id, status, model, tp, ... beside it),
// plus, optionally, the HBM series, phases and activation peaks of the run
// (views/hbm_series.h).
//
// The page shows: the run's header (id, status, mode, tp/dp, msprof
// status), a stacked bar of every device's HBM components, then per device
// the component table (MB, GiB, share, source, the evidence chain of each
// value — blob hashes, log lines with their text, CSV rows —, the
// corroborating values), the cross-validation, and the HBM curve with the
// run's phases and the activation peak when a series for that device is
// given (a deployment over several machines: every node's devices, each
// matched to its series by (machine, device)); then the weight breakdown, the run's evidence chain and the notes.
// Every number of the report's components and cross-validation appears in
// the page as formatted by FormatMbValue (one decimal, comma thousands).
//
// lang "zh" (default) uses the words of the text report (memory_report_text);
// "en" the English ones. Errors: `doc` is not an object, or holds no report
// (no "devices" array in it or under "report").
#pragma once

#include <string>

#include "common/status.h"
#include "views/hbm_series.h"
#include "views/html_page.h"

namespace npuprof::views {

Result<std::string> RenderMemoryReportHtml(const json& doc, const HbmSeriesSet& series = {},
                                           const std::string& lang = "zh");

}  // namespace npuprof::views
