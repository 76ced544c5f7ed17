// MessageToJson: a message as the JSON object its payload is stored and sent
// as (protobuf's JSON mapping with the field names as written in the .proto),
// built by reflection so that what a state machine hands to a task or an
// event is exactly what its message declares.
//
// What is written:
//   * a field without presence (a plain proto3 scalar, string or enum): always,
//     its value or its default, so a (needed) key is present even when it is
//     0, "" or false;
//   * a field with presence (`optional`, or a message field): only when set;
//   * repeated fields as arrays, maps as objects keyed by the key's text;
//   * 64-bit integers as JSON numbers (protobuf's own printer writes them as
//     strings; the stored payloads and the code that reads them back hold
//     them as numbers), enums by name, bytes base64 as the mapping says.
// A wrapper (Int64Value, ...) is written as its value. Non-finite doubles
// become null (read back as the field's default, or unset where it has
// presence). An enum number this build does not know is written as the
// number. Any other well-known type (Struct, Value, Timestamp, ...) is
// written as protobuf's printer writes it (null if the printer refuses it).
// Pure: no I/O; thread-safe.
#pragma once

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

namespace npuprof::sm {

nlohmann::json MessageToJson(const google::protobuf::Message& message);

}  // namespace npuprof::sm
