#include "statemachine/event_schema.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>

#include <map>
#include <memory>

#include <fmt/format.h>

#include "events.pb.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;
using json = nlohmann::json;

struct Schema {
  const pb::Message* prototype;
  std::vector<std::string> required;  // keys marked (required)
};

// Built once from the compiled file; referencing a generated message keeps
// its descriptors linked into every binary that checks events.
const std::map<std::string, Schema, std::less<>>& Schemas() {
  static const auto* kSchemas = [] {
    auto* m = new std::map<std::string, Schema, std::less<>>();
    const pb::FileDescriptor* file = events::RunSubmitted::descriptor()->file();
    for (int i = 0; i < file->message_type_count(); ++i) {
      const pb::Descriptor* d = file->message_type(i);
      if (d->name() == "TaskPolicy") continue;  // a part, not an event
      Schema s{pb::MessageFactory::generated_factory()->GetPrototype(d), {}};
      for (int f = 0; f < d->field_count(); ++f)
        if (d->field(f)->options().GetExtension(events::required)) s.required.push_back(d->field(f)->name());
      m->emplace(d->name(), std::move(s));
    }
    return m;
  }();
  return *kSchemas;
}

}  // namespace

bool HasEventSchema(std::string_view type) { return Schemas().count(type) > 0; }

std::vector<std::string> SchemaEventTypes() {
  std::vector<std::string> out;
  const pb::FileDescriptor* file = events::RunSubmitted::descriptor()->file();
  for (int i = 0; i < file->message_type_count(); ++i)
    if (HasEventSchema(file->message_type(i)->name())) out.push_back(file->message_type(i)->name());
  return out;
}

Status CheckEventPayload(std::string_view type, std::string_view payload_json, const json& payload,
                         UnknownKeys unknown) {
  if (!payload.is_object()) return Status::Corruption(fmt::format("{} payload is not a JSON object", type));
  auto it = Schemas().find(type);
  if (it == Schemas().end()) return Status::Ok();
  const Schema& schema = it->second;
  for (const std::string& key : schema.required)
    if (!payload.contains(key))
      return Status::Corruption(fmt::format("{} payload has no '{}' (proto/events.proto: {}.{} is required)", type,
                                            key, type, key));
  std::unique_ptr<pb::Message> msg(schema.prototype->New());
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = unknown == UnknownKeys::kTolerate;
  const auto st = pb::util::JsonStringToMessage(pb::StringPiece(payload_json.data(), payload_json.size()),
                                                msg.get(), options);
  if (!st.ok())
    return Status::Corruption(fmt::format("{} payload does not match proto/events.proto: {}", type,
                                          std::string(st.message())));
  return Status::Ok();
}

Status CheckEventPayload(std::string_view type, const json& payload, UnknownKeys unknown) {
  if (!payload.is_object()) return Status::Corruption(fmt::format("{} payload is not a JSON object", type));
  return CheckEventPayload(type, payload.dump(), payload, unknown);
}

}  // namespace npuprof::sm
