// TaskLink: what one task attempt cost on the link to its targets, as its
// worker reported it (proto/events.proto TaskLink; workers/ssh/ssh_stats.h,
// "Round trips", says what one round trip is). The worker sends it with the
// attempt's answer; the engine records it under "link" in that attempt's
// TaskSucceeded or TaskFailed event, so a re-dispatched task's attempts each
// keep their own figures.
//
// DecodeTaskLink reads it from such an event's payload. Absent (an event
// written before the figures were recorded, or a failure no worker answered:
// a lost worker, an abandoned task) is nullopt, never zeros. Present, it
// must be an object whose figures are whole numbers >= 0: anything else is
// Corruption naming the event type and the key. Keys it does not know are
// passed over (a newer writer's addition).
// Pure: no I/O; thread-safe.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "events.pb.h"

namespace npuprof::sm {

Result<std::optional<events::TaskLink>> DecodeTaskLink(std::string_view event_type, const nlohmann::json& payload);

// The recorded form: every figure, by its name in events.proto.
nlohmann::json TaskLinkJson(const events::TaskLink& link);

// sum += link, figure by figure.
void AddTaskLink(events::TaskLink& sum, const events::TaskLink& link);

}  // namespace npuprof::sm
