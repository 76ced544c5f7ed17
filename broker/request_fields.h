// Client request arguments, checked before any verb reads them.
//
// Contract: CheckRequestFields(verb, args) looks at the top-level fields a
// verb reads (run_id, spec, events, ...). A field that is present with the
// wrong JSON type is refused with an error naming the field, the type it must
// have and the type that was sent; absent fields and fields no verb reads are
// left alone (the verb applies its defaults). It also refuses a run_id that
// is not a safe id. Pure: no I/O, never throws.
//
// Deeper structure (a submit's spec, an import's events) is checked where it
// is decoded: by each run kind's spec parser, and by Import per event.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/json_shape.h"
#include "common/status.h"

namespace npuprof::broker {

Status CheckRequestFields(std::string_view verb, const nlohmann::json& args);

// The JSON type of v in words, for error texts (common/json_shape.h).
using npuprof::JsonTypeWords;

}  // namespace npuprof::broker
