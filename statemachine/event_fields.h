// The fields the engine's fold reads from each shared event type, checked
// before a stored or imported event is folded: a payload that is not a JSON
// object, or a field of the wrong JSON type, is Corruption naming the event
// type and the field (never a silent default, never an exception later).
// Fields the fold treats as optional may be absent; when present they must
// have their type. Kind-specific events are the kinds' own business (their
// folds read with defaults). Pure: no I/O.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

Status CheckEventFields(const std::string& type, const nlohmann::json& payload);

}  // namespace npuprof::sm
