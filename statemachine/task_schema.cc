#include "statemachine/task_schema.h"

#include <google/protobuf/descriptor.h>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "statemachine/json_message_table.h"
#include "task_payloads.pb.h"
#include "task_results.pb.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;
using json = nlohmann::json;

// Built once from the compiled files; referencing a generated message keeps
// their descriptors linked into every binary that checks payloads.
const JsonMessageTable& Payloads() {
  static const JsonMessageTable* kTable =
      new JsonMessageTable(*tasks::Machine::descriptor()->file(), TaskKindOf,
                           [](const pb::FieldDescriptor& f) { return f.options().GetExtension(tasks::needed); });
  return *kTable;
}

const JsonMessageTable& Results() {
  static const JsonMessageTable* kTable = new JsonMessageTable(*results::HostKeyAccepted::descriptor()->file(),
                                                               ResultKindOf,
                                                               [](const pb::FieldDescriptor&) { return false; });
  return *kTable;
}

Status Refused(std::string_view kind, const std::string& why) {
  return Status::Invalid(fmt::format("{} task payload {} (proto/task_payloads.proto)", kind, why));
}

// The (needed) keys, then the message's own parse of the text.
Status Judge(std::string_view kind, const json& payload, std::string_view text, pb::Message* out) {
  if (!payload.is_object()) return Refused(kind, "is not a JSON object");
  auto misfit = Payloads().Judge(kind, payload, text, /*tolerate_unknown_keys=*/false, out);
  if (!misfit) return Status::Ok();
  if (!misfit->missing_key.empty())
    return Refused(kind, fmt::format("has no '{}', which the task needs", misfit->missing_key));
  return Refused(kind, fmt::format("does not match its message {}: {}",
                                   Payloads().Prototype(kind)->GetDescriptor()->name(), misfit->why));
}

}  // namespace

std::string TaskKindOf(const pb::Descriptor& message) { return message.options().GetExtension(tasks::task_kind); }

bool HasTaskSchema(std::string_view task_kind) { return Payloads().Prototype(task_kind) != nullptr; }

std::vector<std::string> SchemaTaskKinds() { return Payloads().Keys(); }

Status CheckTaskPayload(std::string_view task_kind, const json& payload) {
  const pb::Message* prototype = Payloads().Prototype(task_kind);
  if (prototype == nullptr) return Status::Ok();
  return Judge(task_kind, payload, "", nullptr);
}

Status CheckTaskPayloadText(std::string_view task_kind, std::string_view payload_json) {
  const pb::Message* prototype = Payloads().Prototype(task_kind);
  if (prototype == nullptr) return Status::Ok();
  const Result<json> payload = ParseJson(payload_json);
  if (!payload.ok()) return Refused(task_kind, "is " + payload.status().message());
  return Judge(task_kind, *payload, payload_json, nullptr);
}

Status DecodeTaskPayload(std::string_view task_kind, std::string_view payload_json, pb::Message& out) {
  const pb::Message* prototype = Payloads().Prototype(task_kind);
  if (prototype == nullptr || prototype->GetDescriptor() != out.GetDescriptor())
    return Status::Internal(fmt::format("a handler decodes {} payloads as {}, which proto/task_payloads.proto does "
                                        "not declare for that kind",
                                        task_kind, out.GetDescriptor()->full_name()));
  const Result<json> payload = ParseJson(payload_json);
  if (!payload.ok()) return Refused(task_kind, "is " + payload.status().message());
  return Judge(task_kind, *payload, payload_json, &out);
}

Status DecodeStoredTaskPayload(std::string_view task_kind, const json& payload, pb::Message& out) {
  const pb::Message* prototype = Payloads().Prototype(task_kind);
  if (prototype == nullptr || prototype->GetDescriptor() != out.GetDescriptor())
    return Status::Internal(fmt::format("a stored {} payload was read as {}, which proto/task_payloads.proto does not "
                                        "declare for that kind",
                                        task_kind, out.GetDescriptor()->full_name()));
  if (!payload.is_object())
    return Status::Corruption(fmt::format("a stored {} task payload is not a JSON object (proto/task_payloads.proto)",
                                          task_kind));
  // Read as stored: the needed keys were judged when it was scheduled; one
  // an older npuprof did not write reads its default.
  const std::string text = payload.dump(-1, ' ', false, json::error_handler_t::replace);
  if (auto why = JsonMessageTable::Parse(text, out, /*tolerate_unknown_keys=*/true, &payload))
    return Status::Corruption(fmt::format("a stored {} task payload cannot be read as {} (proto/task_payloads.proto): {}",
                                          task_kind, prototype->GetDescriptor()->name(), *why));
  return Status::Ok();
}

std::string ResultKindOf(const pb::Descriptor& message) { return message.options().GetExtension(results::result_of); }

bool HasResultSchema(std::string_view task_kind) { return Results().Prototype(task_kind) != nullptr; }

std::vector<std::string> ResultSchemaTaskKinds() { return Results().Keys(); }

Status CheckTaskResult(std::string_view task_kind, const json& result) {
  return DecodeTaskResult(task_kind, result).status();
}

Result<std::shared_ptr<const pb::Message>> DecodeTaskResult(std::string_view task_kind, const json& result,
                                                            bool tolerate_unknown_keys) {
  const pb::Message* prototype = Results().Prototype(task_kind);
  if (prototype == nullptr) return std::shared_ptr<const pb::Message>();
  // The prototype is the message's immutable default instance.
  if (result.is_null() || (result.is_object() && result.empty()))
    return std::shared_ptr<const pb::Message>(prototype, [](const pb::Message*) {});
  if (!result.is_object())
    return Status::Invalid(fmt::format("{} task result is not a JSON object (proto/task_results.proto)", task_kind));
  std::shared_ptr<pb::Message> out(prototype->New());
  if (auto misfit = Results().Judge(task_kind, result, "", tolerate_unknown_keys, out.get()))
    return Status::Invalid(fmt::format("{} task result does not match its message {} (proto/task_results.proto): {}",
                                       task_kind, prototype->GetDescriptor()->name(), misfit->why));
  return std::shared_ptr<const pb::Message>(std::move(out));
}

}  // namespace npuprof::sm
