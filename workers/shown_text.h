// Where a task's outcome becomes the worker's message to the broker: every
// field people read (the error, the result JSON's strings and keys, progress
// text, evidence names) is made valid UTF-8 here with common/utf8.h, because
// proto3 `string` fields and JSON text must be UTF-8 and bytes from a target
// need not be (a GBK process name, a driver printing `\377\376`). Evidence
// blob bytes never pass through here: they stay exact. Pure.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::workers {

// j with every string value and object key made valid UTF-8 (ToValidUtf8).
nlohmann::json ValidUtf8Json(nlohmann::json j);

// j.dump(), never throwing: a result holding invalid UTF-8 is dumped as
// ValidUtf8Json(j) instead.
std::string ResultJsonText(const nlohmann::json& j);

}  // namespace npuprof::workers
