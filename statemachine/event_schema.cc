#include "statemachine/event_schema.h"

#include <google/protobuf/descriptor.h>


#include <fmt/format.h>

#include "events.pb.h"
#include "kind_events.pb.h"
#include "statemachine/json_message_table.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;
using json = nlohmann::json;

// Built once from the compiled file; referencing a generated message keeps
// its descriptors linked into every binary that checks events.
const JsonMessageTable& Table() {
  static const JsonMessageTable* kTable = new JsonMessageTable(
      *events::RunSubmitted::descriptor()->file(),
      [](const pb::Descriptor& d) {  // TaskPolicy, LeaseLeg and TaskLink are parts of events
        return d.name() == "TaskPolicy" || d.name() == "LeaseLeg" || d.name() == "TaskLink" ? std::string() : d.name();
      },
      [](const pb::FieldDescriptor& f) { return f.options().GetExtension(events::required); });
  return *kTable;
}

// The kinds' own events (proto/kind_events.proto): verify and import judge
// them too; a kind's fold reads its events itself.
const JsonMessageTable& KindTable() {
  static const JsonMessageTable* kTable = new JsonMessageTable(
      *kind_events::ProbeRecorded::descriptor()->file(), [](const pb::Descriptor& d) { return d.name(); },
      [](const pb::FieldDescriptor& f) { return f.options().GetExtension(kind_events::needed); });
  return *kTable;
}

}  // namespace

bool HasEventSchema(std::string_view type) { return Table().Prototype(type) != nullptr; }

std::vector<std::string> SchemaEventTypes() { return Table().Keys(); }

bool HasKindEventSchema(std::string_view type) { return KindTable().Prototype(type) != nullptr; }

std::vector<std::string> KindEventTypes() { return KindTable().Keys(); }

Status CheckEventPayload(std::string_view type, std::string_view payload_json, const json& payload,
                         UnknownKeys unknown) {
  if (!payload.is_object()) return Status::Corruption(fmt::format("{} payload is not a JSON object", type));
  const bool shared = Table().Prototype(type) != nullptr;
  const JsonMessageTable& table = shared ? Table() : KindTable();
  const char* file = shared ? "proto/events.proto" : "proto/kind_events.proto";
  auto misfit = table.Judge(type, payload, payload_json, unknown == UnknownKeys::kTolerate);
  if (!misfit) return Status::Ok();
  if (!misfit->missing_key.empty())
    return Status::Corruption(fmt::format("{} payload has no '{}' ({}: {}.{} is required)", type,
                                          misfit->missing_key, file, type, misfit->missing_key));
  return Status::Corruption(fmt::format("{} payload does not match {}: {}", type, file, misfit->why));
}

Status CheckEventPayload(std::string_view type, const json& payload, UnknownKeys unknown) {
  if (!payload.is_object()) return Status::Corruption(fmt::format("{} payload is not a JSON object", type));
  return CheckEventPayload(type, payload.dump(), payload, unknown);
}

}  // namespace npuprof::sm
