// The report's operator memory per device (memory-profile --operator-memory):
// a pure projection of the run's data.operator_memory (the
// memory.operator_memory result), decoded once (DecodeOperatorMemoryRanks).
//
// Each device of the report gains "operator_memory" (docs/FORMATS.md#mem-operator-memory):
//   {"status": "ok" | "partial" | "unavailable" | "no_data",
//    "problems": [text, ...]   what was wrong with this rank's files,
//    "peak_operators": [{"name", "size_mb", "allocated_at_us",
//                        "released_at_us" (null: not released in the window),
//                        "evidence": {"file": "operator_memory.csv", "row", "dir", "blob"}}],
//    "peak_allocated_mb", "peak_reserved_mb", "fragmentation_mb" (reserved - allocated
//    at the peak row), "peak_at_us", "peak_evidence": {"file": "memory_record.csv", "row", "dir", "blob"},
//    "window": {"first_us", "last_us", "max_reserved_mb", "pta_rows"}}
// Values the rank's files could not give are null. A device is matched to
// its rank by device id. A record that cannot be decoded leaves every
// device "unavailable" with the decoding error, and a note; the rest of the
// report stands.
#pragma once

#include "statemachine/run_state.h"

namespace npuprof::sm {

// No-op when `record` is not an object (the run did not ask for operator memory).
void AddOperatorMemory(const json& record, json& devices, json& notes);

}  // namespace npuprof::sm
