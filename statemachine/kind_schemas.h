// A run kind's own documents judged against their messages: its validated
// spec (proto/run_specs.proto, one message per kind, the (spec_of) option
// naming the kind) and its data, the fold of its own events kept in
// RunState.data (proto/kind_data.proto, (data_of)). Together with the
// events' and tasks' messages they are the whole of what a run holds.
//
// A document that is not a JSON object, holds a key its message does not
// declare, or a value of the wrong type is refused naming the kind, the
// message and the key; a kind without a message (a test's, a plugin's)
// passes. Who judges:
//   * the engine, a submitted spec after the kind's ValidateSpec: the
//     submission is refused (Status::Invalid) and nothing runs;
//   * `npuprof verify` and `import` (replay_verifier.h), the stored
//     RunSubmitted.spec, and the data after every event a kind folds
//     (Status::Corruption), so a fold that writes an undeclared key, or a
//     stored event that folds to one, is found and named.
// Pure: no I/O; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

// Specs: whether proto/run_specs.proto declares this kind's, the kinds it
// declares in its order, and the kind a spec message belongs to ("" for none).
bool HasRunSpecSchema(std::string_view kind);
std::vector<std::string> RunSpecKinds();
std::string SpecKindOf(const google::protobuf::Descriptor& message);
// Status::Invalid naming the key when `spec` does not fit kind's message.
Status CheckRunSpec(std::string_view kind, const nlohmann::json& spec);

// The spec decoded as kind's message, for the fold to keep (RunState.
// typed_spec): keys the message does not declare are passed over (an older
// store's; `verify` reports them), a value of the wrong type is Corruption
// naming the key. nullptr for a kind without a spec message.
Result<std::shared_ptr<const google::protobuf::Message>> DecodeRunSpec(std::string_view kind,
                                                                       const nlohmann::json& spec);

// Data: the same for proto/kind_data.proto.
bool HasKindDataSchema(std::string_view kind);
std::vector<std::string> KindDataKinds();
std::string DataKindOf(const google::protobuf::Descriptor& message);
// Status::Corruption naming the key when `data` does not fit kind's message.
Status CheckKindData(std::string_view kind, const nlohmann::json& data);
// Reads `data` (a run's RunState.data) into `out`, which must be kind's data
// message (else Status::Internal): keys the message does not declare are
// passed over (an older fold's; `verify` reports them), a value of the wrong
// type is Corruption naming the key. An empty or null document reads as the
// empty message. The reader a kind uses is DataOf (typed_data.h).
Status DecodeKindData(std::string_view kind, const nlohmann::json& data, google::protobuf::Message& out);

}  // namespace npuprof::sm
