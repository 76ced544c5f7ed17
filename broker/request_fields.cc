#include "broker/request_fields.h"

#include <fmt/format.h>

#include "common/json_shape.h"

namespace npuprof::broker {

namespace {

using nlohmann::json;

using Want = JsonShape;
constexpr Want kString = JsonShape::kString, kObject = JsonShape::kObject, kArray = JsonShape::kArray,
               kBool = JsonShape::kBool, kUnsigned = JsonShape::kUnsigned;

struct Field {
  const char* name;
  Want want;
};

// The fields each verb reads (broker/client_api.cc). machine.add takes a
// whole machine record, which the inventory decodes with its own errors.
std::initializer_list<Field> FieldsOf(std::string_view verb) {
  static const std::initializer_list<Field> kSubmit = {
      {"kind", kString}, {"spec", kObject}, {"run_id", kString}};
  static const std::initializer_list<Field> kRun = {{"run_id", kString}};
  static const std::initializer_list<Field> kEvents = {{"run_id", kString}, {"from_seq", kUnsigned}};
  static const std::initializer_list<Field> kRuns = {{"state", kString},   {"kind", kString},
                                                     {"machine", kString}, {"tag", kString},
                                                     {"status", kString},  {"terminal", kBool}};
  static const std::initializer_list<Field> kCancel = {{"run_id", kString}, {"by", kString}};
  static const std::initializer_list<Field> kMachine = {{"name", kString}};
  static const std::initializer_list<Field> kImport = {{"run_id", kString}, {"events", kArray}};
  static const std::initializer_list<Field> kSignal = {
      {"run_id", kString}, {"name", kString}, {"payload", kObject}};
  static const std::initializer_list<Field> kBlob = {{"sha256", kString}};
  static const std::initializer_list<Field> kNone = {};
  if (verb == "submit") return kSubmit;
  if (verb == "show" || verb == "manifest" || verb == "verify") return kRun;
  if (verb == "events") return kEvents;
  if (verb == "runs") return kRuns;
  if (verb == "cancel") return kCancel;
  if (verb.substr(0, 8) == "machine.") return kMachine;
  if (verb == "import") return kImport;
  if (verb == "signal") return kSignal;
  if (verb == "blob") return kBlob;
  return kNone;
}

}  // namespace

Status CheckRequestFields(std::string_view verb, const json& args) {
  if (!args.is_object()) return Status::Invalid("request arguments must be a JSON object");
  for (const Field& f : FieldsOf(verb)) {
    auto it = args.find(f.name);
    if (it == args.end()) continue;
    if (!HasShape(*it, f.want))
      return Status::Invalid(fmt::format("{}: field '{}' must be {}, not {}", verb, f.name, ShapeWords(f.want),
                                         JsonTypeWords(*it)));
  }
  return Status::Ok();
}

}  // namespace npuprof::broker
