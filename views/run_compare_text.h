// The compare of runs (views/run_compare.h's JSON) as plain text for a
// terminal. Pure: the same compare and language give the same text.
//
// One column per run (A, B, C, ... in the order given; the header names
// each run's id), then per later run a delta column (MB, or the unit of the
// row) and a percentage column, both against run A. Missing values print
// "-". Memory-profile: the configuration differences, a table per device
// position (every component, KV tokens, used and total HBM, the notes
// saying what is missing), then the totals over devices. Torch-profile:
// the configuration differences, the benchmark table, the gates, and the
// per-rank outputs with their sizes.
//
// lang "zh" (default; the words of the memory text report) or "en".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::views {

std::string RenderRunCompareText(const nlohmann::json& compare, const std::string& lang = "zh");

}  // namespace npuprof::views
