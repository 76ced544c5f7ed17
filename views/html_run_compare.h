// The compare of runs (views/run_compare.h's JSON) as one self-contained
// HTML page (views/html_page.h says what "self-contained" promises). Pure:
// the same compare and language give the same bytes.
//
// The page shows the runs (A, B, ... with id, status, tag, tp/dp, model;
// A is the reference), the configuration differences, then for a
// memory-profile compare a table per device position — one column per run,
// a delta and a percentage column per later run against A, every
// component, KV tokens, used and total HBM, and each value's evidence
// (file:line and the blob's short hash, per run) — and the totals over
// devices; for a torch-profile compare the benchmark table, the gates and
// the outputs per rank with their sizes. MB values are formatted by
// FormatMbValue (one decimal, comma thousands); missing values show "-",
// and the notes say why.
//
// lang "zh" (default) or "en". Errors: `compare` is not an object or has
// no "runs" array (is this the output of `npuprof compare`?).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::views {

Result<std::string> RenderRunCompareHtml(const nlohmann::json& compare, const std::string& lang = "zh");

}  // namespace npuprof::views
