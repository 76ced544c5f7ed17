#include "statemachine/kind_data_schema.h"

#include <memory>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>

#include "kind_data.pb.h"
#include "statemachine/json_message_table.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;
using json = nlohmann::json;

const JsonMessageTable& Table() {
  static const JsonMessageTable* kTable = new JsonMessageTable(
      *kind_data::ProbeData::descriptor()->file(), DataKindOf, [](const pb::FieldDescriptor&) { return false; });
  return *kTable;
}

}  // namespace

std::string DataKindOf(const pb::Descriptor& message) { return message.options().GetExtension(kind_data::data_of); }

bool HasKindDataSchema(std::string_view kind) { return Table().Prototype(kind) != nullptr; }

std::vector<std::string> KindDataKinds() { return Table().Keys(); }

Status CheckKindData(std::string_view kind, const json& data) {
  const pb::Message* prototype = Table().Prototype(kind);
  if (prototype == nullptr) return Status::Ok();
  const std::string name = prototype->GetDescriptor()->name();
  if (!data.is_object())
    return Status::Corruption(fmt::format("the {} data is not a JSON object (proto/kind_data.proto {})", kind, name));
  std::unique_ptr<pb::Message> msg(prototype->New());
  const std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  if (auto why = JsonMessageTable::Parse(text, *msg, /*tolerate_unknown_keys=*/false))
    return Status::Corruption(
        fmt::format("the {} data does not match its message {} (proto/kind_data.proto): {}", kind, name, *why));
  return Status::Ok();
}

}  // namespace npuprof::sm
