// Each run kind's validated spec judged against its message in
// proto/run_specs.proto (the message's (spec_of) option names the kind): the
// single statement of what a run of that kind may be given. A spec that is
// not a JSON object, holds a key the message does not declare, or a value of
// the wrong type is refused naming the kind and the key. A kind without a
// message (a test's, a plugin's) passes.
//
// The engine judges a submitted spec after the kind's ValidateSpec (the
// submission is refused, Status::Invalid, and nothing runs); `npuprof verify`
// and `import` judge the stored RunSubmitted.spec (replay_verifier.h).
// Pure: no I/O; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

// Whether proto/run_specs.proto declares the spec of this run kind.
bool HasRunSpecSchema(std::string_view kind);
// The run kinds proto/run_specs.proto declares, in its order.
std::vector<std::string> RunSpecKinds();
// The kind a spec message belongs to ("" for a message without one).
std::string SpecKindOf(const google::protobuf::Descriptor& message);

// Status::Invalid naming the key when `spec` does not fit kind's message.
Status CheckRunSpec(std::string_view kind, const nlohmann::json& spec);

}  // namespace npuprof::sm
