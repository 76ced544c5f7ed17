#include "statemachine/run_spec_schema.h"

#include <memory>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>

#include "run_specs.pb.h"
#include "statemachine/json_message_table.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;
using json = nlohmann::json;

const JsonMessageTable& Table() {
  static const JsonMessageTable* kTable = new JsonMessageTable(
      *run_specs::ProbeSpec::descriptor()->file(), SpecKindOf, [](const pb::FieldDescriptor&) { return false; });
  return *kTable;
}

}  // namespace

std::string SpecKindOf(const pb::Descriptor& message) { return message.options().GetExtension(run_specs::spec_of); }

bool HasRunSpecSchema(std::string_view kind) { return Table().Prototype(kind) != nullptr; }

std::vector<std::string> RunSpecKinds() { return Table().Keys(); }

Status CheckRunSpec(std::string_view kind, const json& spec) {
  const pb::Message* prototype = Table().Prototype(kind);
  if (prototype == nullptr) return Status::Ok();
  const std::string name = prototype->GetDescriptor()->name();
  if (!spec.is_object()) return Status::Invalid(fmt::format("a {} spec must be a JSON object", kind));
  std::unique_ptr<pb::Message> msg(prototype->New());
  const std::string text = spec.dump(-1, ' ', false, json::error_handler_t::replace);
  if (auto why = JsonMessageTable::Parse(text, *msg, /*tolerate_unknown_keys=*/false))
    return Status::Invalid(fmt::format("the {} spec does not fit its message {} (proto/run_specs.proto lists every "
                                       "field a {} run takes): {}",
                                       kind, name, kind, *why));
  return Status::Ok();
}

}  // namespace npuprof::sm
