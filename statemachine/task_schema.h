// The task payloads and task results judged against their messages:
// proto/task_payloads.proto holds one message per task kind (named by its
// (task_kind) option), the single statement of what each task is given;
// proto/task_results.proto one per task kind (its (result_of) option), what
// each task answers.
//
// A payload is refused (Status::Invalid naming the task kind and the key)
// when it is not a JSON object, lacks a (needed) key, holds a key of the
// wrong type, or holds a key the message does not declare. Both ends judge
// it: Decision::Schedule / ScheduleTask before the TaskScheduled event exists, and the
// worker, decoding it into the handler's message (DecodeTaskPayload,
// workers/typed_handler.h) before its handler runs.
//
// A result is judged the same way (no key is needed; an empty result, "" or
// null, passes: a failure may carry none) by the worker before it answers
// (a handler cannot hand back a key its result message does not declare),
// and again by the engine when it arrives, whoever answered (engine.cc: a
// success that does not fit fails its task, bad_result). The engine keeps its
// parse and hands it to the kind (task_result.h).
//
// A task kind without a message (a kind registered by a test or a plugin)
// passes unchecked and its handler reads the JSON itself.
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

// Whether proto/task_payloads.proto declares the payload of this task kind.
bool HasTaskSchema(std::string_view task_kind);
// The task kinds proto/task_payloads.proto declares, in its order.
std::vector<std::string> SchemaTaskKinds();
// The kind a payload message belongs to ("" for a message without one).
std::string TaskKindOf(const google::protobuf::Descriptor& message);

// Judges a payload the machine built.
Status CheckTaskPayload(std::string_view task_kind, const nlohmann::json& payload);
// Judges a payload as it travels (Task.payload_json): what a worker does
// before it runs the kind's handler.
Status CheckTaskPayloadText(std::string_view task_kind, std::string_view payload_json);

// Decodes the payload text of a task of task_kind into out, whose message
// must be that kind's (Status::Internal otherwise: a handler registered for
// the wrong kind).
Status DecodeTaskPayload(std::string_view task_kind, std::string_view payload_json, google::protobuf::Message& out);
// Decodes a payload as the run state keeps it (TaskScheduled.payload) into
// out, whose message must be task_kind's (Status::Internal otherwise): keys
// an older npuprof wrote that the message no longer declares are passed over,
// and a needed key it did not write reads its default (the payload was judged
// when it was scheduled); a value of the wrong type is Corruption naming the
// key. The reader a kind uses is PayloadOf (task_payload.h).
Status DecodeStoredTaskPayload(std::string_view task_kind, const nlohmann::json& payload,
                               google::protobuf::Message& out);

// Whether proto/task_results.proto declares the result of this task kind.
bool HasResultSchema(std::string_view task_kind);
// The task kinds proto/task_results.proto declares, in its order.
std::vector<std::string> ResultSchemaTaskKinds();
// The kind a result message belongs to ("" for a message without one).
std::string ResultKindOf(const google::protobuf::Descriptor& message);

// Judges a handler's result (a JSON object, or null / empty for none).
Status CheckTaskResult(std::string_view task_kind, const nlohmann::json& result);
// The same judge, keeping its parse: the result as its task kind's message
// (the empty message for a null or empty result; nullptr for a task kind
// without one), for the kind to read (task_result.h).
// tolerate_unknown_keys: for a result as recorded, which an older npuprof
// may have written with keys the message no longer declares.
Result<std::shared_ptr<const google::protobuf::Message>> DecodeTaskResult(std::string_view task_kind,
                                                                          const nlohmann::json& result,
                                                                          bool tolerate_unknown_keys = false);

}  // namespace npuprof::sm
