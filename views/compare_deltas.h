// Deltas of compared values against the reference run (the first). Pure.
#pragma once

#include <nlohmann/json.hpp>

namespace npuprof::views {

// row[delta_key][i] = values[i] - values[0] and row[pct_key][i] = that delta
// / values[0] * 100, rounded to 0.001; an entry is null when either value is
// not a number, and the percentage also when values[0] is 0.
void AddDeltas(nlohmann::json& row, const nlohmann::json& values, const char* delta_key, const char* pct_key);

}  // namespace npuprof::views
