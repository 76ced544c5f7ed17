// The events' payloads judged against their messages: the shared events in
// proto/events.proto (one message per event type, named as the type): the
// single statement of what each shared event carries.
//
// A payload that is not a JSON object, lacks a (required) key, or holds a key
// of the wrong type is Corruption naming the event type and the key. With
// UnknownKeys::kReject a key the message does not declare is Corruption too
// (`npuprof verify`, `import`); kTolerate passes over such keys (a newer
// writer may have added one). The fold that rebuilds a run judges no event
// payload: it decodes the run's spec (typed_spec.h). The kinds' own events are judged
// the same way against proto/kind_events.proto (one message per type, named
// as the type); their kinds' folds read them. CheckEventPayload passes an
// event type in neither file; `verify` and `import` refuse one
// (replay_verifier.h: HasEventSchema or HasKindEventSchema must know it).
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
// Whether proto/kind_events.proto declares a message for this event type,
// and the types it declares in its order.
bool HasKindEventSchema(std::string_view type);
std::vector<std::string> KindEventTypes();

// `payload_json` is the stored text, `payload` the same parsed.
Status CheckEventPayload(std::string_view type, std::string_view payload_json, const nlohmann::json& payload,
                         UnknownKeys unknown);
// Same for a payload held as JSON only (it is serialised for the check).
Status CheckEventPayload(std::string_view type, const nlohmann::json& payload, UnknownKeys unknown);

}  // namespace npuprof::sm
