// Safe readers of one field of a JSON object, for folds and views that must
// never throw on a document of another shape. Pure.
//
// Contract: a missing key, a j that is not an object, or a value of another
// type reads as absent (null, the fallback, nullopt, an empty array). Inputs
// that must be decoded with an error use common/json_shape.h instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace npuprof {

// j[key] when j is an object holding key, else a null value.
const nlohmann::json& Field(const nlohmann::json& j, std::string_view key);
// The string at key, else fallback.
std::string StrField(const nlohmann::json& j, std::string_view key, std::string_view fallback = "");
// The number at key, else nullopt.
std::optional<double> NumField(const nlohmann::json& j, std::string_view key);
// The integer at key (a JSON integer, not a fraction), else nullopt.
std::optional<int64_t> IntField(const nlohmann::json& j, std::string_view key);
// The array at key, else an empty array.
const nlohmann::json& ArrField(const nlohmann::json& j, std::string_view key);

}  // namespace npuprof
