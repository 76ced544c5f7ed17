// PeekTopLevel: one top-level member of a JSON object read straight from its
// text, without parsing the rest. The metrics observer (broker/metrics.h)
// reads a field or two ("kind", "task_id", "reason", "status", "final") of
// every committed event this way: parsing a TaskScheduled payload, which
// carries the whole task payload, would cost more than the rest of the
// event's commit. Pure.
//
// Contract: for text that is a JSON object, returns the value of the first
// member named `key` (compared byte for byte with the raw key) at the top
// level — for a string its raw contents between the quotes (escapes are not
// decoded), for anything else its raw text (123, true, null, {...}). Members
// nested deeper are never matched. Returns nullopt when there is no such
// member or the text is not an object it can walk; it never reads past the
// text and never allocates.
#pragma once

#include <optional>
#include <string_view>

namespace npuprof::metrics {

std::optional<std::string_view> PeekTopLevel(std::string_view json_object, std::string_view key);

}  // namespace npuprof::metrics
