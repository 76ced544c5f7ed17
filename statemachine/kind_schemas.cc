#include "statemachine/kind_schemas.h"

#include <optional>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>

#include "kind_data.pb.h"
#include "run_specs.pb.h"
#include "statemachine/json_message_table.h"
#include "statemachine/run_kind.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;
using json = nlohmann::json;

bool NothingNeeded(const pb::FieldDescriptor&) { return false; }

const JsonMessageTable& Specs() {
  static const JsonMessageTable* kTable =
      new JsonMessageTable(*run_specs::ProbeSpec::descriptor()->file(), SpecKindOf, NothingNeeded);
  return *kTable;
}

const JsonMessageTable& Data() {
  static const JsonMessageTable* kTable =
      new JsonMessageTable(*kind_data::ProbeData::descriptor()->file(), DataKindOf, NothingNeeded);
  return *kTable;
}

// Why `doc` does not fit the message kept under kind, or nullopt when it
// does (or when there is no message).
std::optional<std::string> Mismatch(const JsonMessageTable& table, std::string_view kind, const json& doc,
                                    const char* what, const char* file) {
  const pb::Message* prototype = table.Prototype(kind);
  if (prototype == nullptr) return std::nullopt;
  const std::string name = prototype->GetDescriptor()->name();
  if (!doc.is_object()) return fmt::format("the {} {} is not a JSON object ({} {})", kind, what, file, name);
  if (auto misfit = table.Judge(kind, doc, "", /*tolerate_unknown_keys=*/false))
    return fmt::format("the {} {} does not fit its message {} ({} lists every field it may hold): {}", kind, what,
                       name, file, misfit->why);
  return std::nullopt;
}

}  // namespace

std::string SpecKindOf(const pb::Descriptor& message) { return message.options().GetExtension(run_specs::spec_of); }
bool HasRunSpecSchema(std::string_view kind) { return Specs().Prototype(kind) != nullptr; }
std::vector<std::string> RunSpecKinds() { return Specs().Keys(); }

Status CheckRunSpec(std::string_view kind, const json& spec) {
  if (auto why = Mismatch(Specs(), kind, spec, "spec", "proto/run_specs.proto")) return Status::Invalid(*why);
  return Status::Ok();
}

Result<std::shared_ptr<const pb::Message>> DecodeRunSpec(std::string_view kind, const json& spec) {
  const pb::Message* prototype = Specs().Prototype(kind);
  if (prototype == nullptr) return std::shared_ptr<const pb::Message>();
  if (!spec.is_object())
    return Status::Corruption(fmt::format("the {} spec is not a JSON object (proto/run_specs.proto)", kind));
  std::shared_ptr<pb::Message> msg(prototype->New());
  if (auto misfit = Specs().Judge(kind, spec, "", /*tolerate_unknown_keys=*/true, msg.get()))
    return Status::Corruption(fmt::format("the {} spec cannot be read as {} (proto/run_specs.proto): {}", kind,
                                          prototype->GetDescriptor()->name(), misfit->why));
  return std::shared_ptr<const pb::Message>(std::move(msg));
}

Status RefreshTypedSpec(RunState& s, const RunKind* kind) {
  s.typed_spec.reset();
  if (!HasRunSpecSchema(s.kind)) return Status::Ok();
  json filled = s.spec;
  const bool refilled = kind != nullptr && kind->ValidateSpec(filled).ok();
  auto decoded = DecodeRunSpec(s.kind, refilled ? filled : s.spec);
  if (!decoded.ok()) return decoded.status();
  s.typed_spec = std::move(decoded).value();
  return Status::Ok();
}

std::string DataKindOf(const pb::Descriptor& message) { return message.options().GetExtension(kind_data::data_of); }
bool HasKindDataSchema(std::string_view kind) { return Data().Prototype(kind) != nullptr; }
std::vector<std::string> KindDataKinds() { return Data().Keys(); }

Status CheckKindData(std::string_view kind, const json& data) {
  if (auto why = Mismatch(Data(), kind, data, "data", "proto/kind_data.proto")) return Status::Corruption(*why);
  return Status::Ok();
}

Status DecodeKindData(std::string_view kind, const json& data, pb::Message& out) {
  const pb::Message* prototype = Data().Prototype(kind);
  if (prototype == nullptr || prototype->GetDescriptor() != out.GetDescriptor())
    return Status::Internal(fmt::format("the {} data was read as {}, but proto/kind_data.proto declares {} for that kind",
                                        kind, out.GetDescriptor()->full_name(),
                                        prototype ? prototype->GetDescriptor()->full_name() : std::string("none")));
  out.Clear();
  if (data.is_null() || (data.is_object() && data.empty())) return Status::Ok();
  if (!data.is_object())
    return Status::Corruption(fmt::format("the {} data is not a JSON object (proto/kind_data.proto)", kind));
  if (auto misfit = Data().Judge(kind, data, "", /*tolerate_unknown_keys=*/true, &out))
    return Status::Corruption(fmt::format("the {} data cannot be read as {} (proto/kind_data.proto): {}", kind,
                                          prototype->GetDescriptor()->name(), misfit->why));
  return Status::Ok();
}

}  // namespace npuprof::sm
