// One device's operator memory at the activation peak (the report's
// "operator_memory" entry, statemachine/operator_memory_report.h) in the
// HTML memory report: the PTA allocated / reserved and fragmentation at the
// peak, the rank's problems, and the operators holding the peak with their
// operator_memory.csv rows; and the marker that puts the peak and its top
// operator on the device's HBM curve. Pure.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "views/charts.h"
#include "views/html_page.h"

namespace npuprof::views {

// "" when the entry is not an object (the run did not ask for operator memory).
std::string OperatorMemoryHtml(const json& entry, bool zh);

// The marker at the peak (seconds from `origin_us`, the chart's origin):
// nullopt without a peak time.
std::optional<TimePhase> OperatorPeakMarker(const json& entry, double origin_us, bool zh);

}  // namespace npuprof::views
