// The pure parts of `npuprof submit sweep`: splitting a --grid value into its
// values, the grid's cartesian product, and which of a child kind's submit
// flags may be grid keys. No I/O.
//
// Values are split on commas outside quotes and outside [] / {} (so a JSON
// value like {"cudagraph_mode":"FULL_DECODE_ONLY","x":1} stays whole);
// spaces around a value are dropped, and so are quotes wrapping a whole
// value ('a, b' -> a, b); an empty value is an error.
// Points are produced in row-major order: the last --grid key varies fastest.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace npuprof::cli {

struct GridAxis {
  std::string key;                  // a child submit flag without "--": "gpu-memory-utilization"
  std::vector<std::string> values;  // as written
};

// "KEY=V1,V2,..." -> axis. Errors name the option and the fix.
Result<GridAxis> ParseGridOption(const std::string& option);
// Every combination, one (key, value) list per point.
std::vector<std::vector<std::pair<std::string, std::string>>> GridPoints(const std::vector<GridAxis>& axes);
// Flags that can never be grid keys (they name the run, the server or the
// sweep itself, or must differ per run).
bool IsReservedGridKey(const std::string& key);

// Multi-node sweeps (docs/COMPARE.md "Sweeps"). A `node` grid value is one
// point's deployment: a JSON array of --node values, head first
// (["box1","box2:0,1"]); an error names the value and shows the form.
Result<std::vector<std::string>> ParseNodeList(const std::string& value);
// The values of every --node / --node=V in args, in order.
std::vector<std::string> NodeFlagValues(const std::vector<std::string>& args);

}  // namespace npuprof::cli
