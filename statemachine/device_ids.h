// Device ids: the one type an NPU's logical id has in npuprof, from the CLI
// (--devices) through the spec, the lease events, the scheduler and the
// launch to the lease audit. Pure.
//
// An id is an integer 0..kMaxDeviceId. Each form an id list comes in has one
// parser here, and every reader uses it, so a list is judged once, where it
// enters, and never read leniently later:
// * text, as --devices gives it: "0,1" — decimal digits (at most 4) between
//   commas, nothing else (no sign, space, empty entry or 0x);
// * JSON, as a spec or a stored event holds it: an array of integers (a
//   number with a fraction, a string such as "1", a negative or too large
//   number is refused).
// Errors name what was read (`what`) and the offending entry. A list may
// name an id twice only where the caller allows it (spec devices do not).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

using DeviceId = int32_t;
using DeviceIds = std::vector<DeviceId>;
inline constexpr DeviceId kMaxDeviceId = 4095;

// "0,1" -> {0, 1}.
Result<DeviceIds> ParseDeviceIdText(std::string_view text);
// [0, 1] -> {0, 1}.
Result<DeviceIds> DeviceIdsFromJson(const nlohmann::json& ids, std::string_view what);
// Throws std::invalid_argument with DeviceIdsFromJson's message: for folds,
// whose caller turns a throw into Corruption naming the event.
DeviceIds DeviceIdsOrThrow(const nlohmann::json& ids, std::string_view what);
nlohmann::json DeviceIdsJson(const DeviceIds& ids);
// "0,1" (for messages).
std::string DeviceIdsText(const DeviceIds& ids);

}  // namespace npuprof::sm
