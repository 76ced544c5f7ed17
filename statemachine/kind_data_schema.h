// Each run kind's own data (RunState.data) judged against its message in
// proto/kind_data.proto (the message's (data_of) option names the kind): the
// single statement of what a kind keeps. Data that is not a JSON object,
// holds a key the message does not declare, or a value of the wrong type is
// Corruption naming the kind, the message and the key. A kind without a
// message (a test's, a plugin's) passes.
//
// `npuprof verify` and `import` judge the data after every kind event they
// fold (replay_verifier.h), so a fold that writes an undeclared key, or a
// stored event that folds to one, is found and named.
// Pure: no I/O; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

// Whether proto/kind_data.proto declares the data of this run kind.
bool HasKindDataSchema(std::string_view kind);
// The run kinds proto/kind_data.proto declares, in its order.
std::vector<std::string> KindDataKinds();
// The kind a data message belongs to ("" for a message without one).
std::string DataKindOf(const google::protobuf::Descriptor& message);

Status CheckKindData(std::string_view kind, const nlohmann::json& data);

}  // namespace npuprof::sm
