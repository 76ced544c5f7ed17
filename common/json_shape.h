// The JSON shapes decoders ask of a field, and the words for them in error
// texts: one place for "must be a whole number >= 0, not a string" so every
// boundary (client requests, imported events, stored events) says it alike.
// Pure, never throws.
#pragma once

#include <nlohmann/json.hpp>

namespace npuprof {

enum class JsonShape { kString, kObject, kArray, kBool, kUnsigned, kInteger };

bool HasShape(const nlohmann::json& v, JsonShape shape);
// "a string", "a whole number >= 0", ...
const char* ShapeWords(JsonShape shape);
// What v is, in the same words ("null", "an integer", "a number with a fraction", ...).
const char* JsonTypeWords(const nlohmann::json& v);

}  // namespace npuprof
