#include "broker/request_fields.h"

#include <fmt/format.h>

namespace npuprof::broker {

namespace {

using nlohmann::json;

enum class Want { kString, kObject, kArray, kBool, kUnsigned };

struct Field {
  const char* name;
  Want want;
};

const char* WantWords(Want w) {
  switch (w) {
    case Want::kString: return "a string";
    case Want::kObject: return "an object";
    case Want::kArray: return "an array";
    case Want::kBool: return "true or false";
    case Want::kUnsigned: return "a whole number >= 0";
  }
  return "?";
}

bool Matches(const json& v, Want w) {
  switch (w) {
    case Want::kString: return v.is_string();
    case Want::kObject: return v.is_object();
    case Want::kArray: return v.is_array();
    case Want::kBool: return v.is_boolean();
    case Want::kUnsigned: return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
  }
  return false;
}

// The fields each verb reads (broker/client_api.cc). machine.add takes a
// whole machine record, which the inventory decodes with its own errors.
std::initializer_list<Field> FieldsOf(std::string_view verb) {
  static const std::initializer_list<Field> kSubmit = {
      {"kind", Want::kString}, {"spec", Want::kObject}, {"run_id", Want::kString}};
  static const std::initializer_list<Field> kRun = {{"run_id", Want::kString}};
  static const std::initializer_list<Field> kEvents = {{"run_id", Want::kString}, {"from_seq", Want::kUnsigned}};
  static const std::initializer_list<Field> kRuns = {{"state", Want::kString},   {"kind", Want::kString},
                                                     {"machine", Want::kString}, {"tag", Want::kString},
                                                     {"status", Want::kString},  {"terminal", Want::kBool}};
  static const std::initializer_list<Field> kCancel = {{"run_id", Want::kString}, {"by", Want::kString}};
  static const std::initializer_list<Field> kMachine = {{"name", Want::kString}};
  static const std::initializer_list<Field> kImport = {{"run_id", Want::kString}, {"events", Want::kArray}};
  static const std::initializer_list<Field> kSignal = {
      {"run_id", Want::kString}, {"name", Want::kString}, {"payload", Want::kObject}};
  static const std::initializer_list<Field> kBlob = {{"sha256", Want::kString}};
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

const char* JsonTypeWords(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "nothing";
  }
  return "?";
}

Status CheckRequestFields(std::string_view verb, const json& args) {
  if (!args.is_object()) return Status::Invalid("request arguments must be a JSON object");
  for (const Field& f : FieldsOf(verb)) {
    auto it = args.find(f.name);
    if (it == args.end()) continue;
    if (!Matches(*it, f.want))
      return Status::Invalid(fmt::format("{}: field '{}' must be {}, not {}", verb, f.name, WantWords(f.want),
                                         JsonTypeWords(*it)));
  }
  return Status::Ok();
}

}  // namespace npuprof::broker
