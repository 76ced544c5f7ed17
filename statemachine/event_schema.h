// The shared events' payloads judged against their messages in
// proto/events.proto (one message per event type, named as the type): the
// single statement of what each shared event carries.
//
// A payload that is not a JSON object, lacks a (required) key, or holds a key
// of the wrong type is Corruption naming the event type and the key. With
// UnknownKeys::kReject a key the message does not declare is Corruption too
// (`npuprof verify`, `import`); the fold that rebuilds a run uses kTolerate
// (a newer writer may have added a key). An event type without a message is
// a kind's own event and passes: its kind's fold reads it.
// Pure: no I/O; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

enum class UnknownKeys { kReject, kTolerate };

// Whether proto/events.proto declares a message for this event type.
bool HasEventSchema(std::string_view type);
// The event types proto/events.proto declares, in its order.
std::vector<std::string> SchemaEventTypes();

// `payload_json` is the stored text, `payload` the same parsed.
Status CheckEventPayload(std::string_view type, std::string_view payload_json, const nlohmann::json& payload,
                         UnknownKeys unknown);
// Same for a payload held as JSON only (it is serialised for the check).
Status CheckEventPayload(std::string_view type, const nlohmann::json& payload, UnknownKeys unknown);

}  // namespace npuprof::sm
