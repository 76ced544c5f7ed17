#include "statemachine/json_message_table.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include <memory>

#include <fmt/format.h>

#include "common/json_depth.h"
namespace npuprof::sm {

namespace pb = google::protobuf;

JsonMessageTable::JsonMessageTable(const pb::FileDescriptor& file, const KeyOf& key_of, const IsNeeded& is_needed) {
  for (int i = 0; i < file.message_type_count(); ++i) {
    const pb::Descriptor* d = file.message_type(i);
    std::string key = key_of(*d);
    if (key.empty()) continue;
    Entry e{pb::MessageFactory::generated_factory()->GetPrototype(d), {}};
    for (int f = 0; f < d->field_count(); ++f)
      if (is_needed(*d->field(f))) e.needed.push_back(d->field(f)->name());
    if (entries_.emplace(key, std::move(e)).second) keys_.push_back(std::move(key));
  }
}

const pb::Message* JsonMessageTable::Prototype(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.prototype;
}

std::optional<JsonMessageTable::Misfit> JsonMessageTable::Judge(std::string_view key, const nlohmann::json& payload,
                                                                 std::string_view text, bool tolerate_unknown_keys,
                                                                 pb::Message* out) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  for (const std::string& k : it->second.needed)
    if (!payload.is_object() || !payload.contains(k)) return Misfit{k, ""};
  std::unique_ptr<pb::Message> own;
  if (out == nullptr) {
    own.reset(it->second.prototype->New());
    out = own.get();
  }
  std::string dumped;
  if (text.empty()) {
    dumped = payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    text = dumped;
  }
  if (auto why = Parse(text, *out, tolerate_unknown_keys, &payload)) return Misfit{"", std::move(*why)};
  return std::nullopt;
}

namespace {

bool WellKnown(const pb::Descriptor& d) { return d.file()->name().rfind("google/protobuf/", 0) == 0; }

// A bool field's value as protobuf's parser would misread it: the parser
// also takes the strings "yes", "y", "t" and "1" as true (and "no", "0" as
// false), where the JSON mapping writes only true and false.
bool NotABool(const nlohmann::json& v) { return !v.is_null() && !v.is_boolean(); }

// The first key below `j` (the JSON of a message d) that the parser would
// read other than as written, "" when there is none:
// * a key that is not one of the fields' names as written in the .proto
//   ("a.b" for a nested one), with the name to write instead when the key is
//   the field's lowerCamelCase JSON name;
// * a bool field holding anything but true, false or null.
// Values of well-known types (Struct, Value, ...) are documents of their own
// and are not looked into.
std::string Misread(const nlohmann::json& j, const pb::Descriptor& d, const std::string& at) {
  if (!j.is_object() || WellKnown(d)) return "";
  for (const auto& [key, value] : j.items()) {
    const pb::FieldDescriptor* f = d.FindFieldByName(key);
    if (f == nullptr) {
      const pb::FieldDescriptor* json_named = d.FindFieldByCamelcaseName(key);
      return json_named ? fmt::format("{}{}: write the field's name, {}", at, key, json_named->name())
                        : fmt::format("{}{}: no such field", at, key);
    }
    const std::string here = at + key;
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL) {
      const bool bad = f->is_repeated() && value.is_array()
                           ? std::any_of(value.begin(), value.end(), [](const auto& v) { return NotABool(v); })
                           : NotABool(value);
      if (bad) return fmt::format("{}: a bool is written true or false, not as a {}", here, value.type_name());
      continue;
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || value.is_null()) continue;
    if (f->is_map()) {
      const pb::FieldDescriptor* v = f->message_type()->map_value();
      if (v->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || !value.is_object()) continue;
      for (const auto& [k, item] : value.items())
        if (std::string bad = Misread(item, *v->message_type(), here + "." + k + "."); !bad.empty())
          return bad;
    } else if (f->is_repeated()) {
      if (!value.is_array()) continue;
      for (size_t i = 0; i < value.size(); ++i)
        if (std::string bad = Misread(value[i], *f->message_type(), fmt::format("{}[{}].", here, i));
            !bad.empty())
          return bad;
    } else if (std::string bad = Misread(value, *f->message_type(), here + "."); !bad.empty()) {
      return bad;
    }
  }
  return "";
}

}  // namespace

std::optional<std::string> JsonMessageTable::Parse(std::string_view text, pb::Message& out,
                                                   bool tolerate_unknown_keys, const nlohmann::json* parsed) {
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = tolerate_unknown_keys;
  const auto st = pb::util::JsonStringToMessage(pb::StringPiece(text.data(), text.size()), &out, options);
  if (!st.ok()) return std::string(st.message());
  // A document read as stored (unknown keys tolerated) is read as the parser
  // reads it: an older npuprof stored what it judged then.
  if (tolerate_unknown_keys) return std::nullopt;
  // protobuf's parser also takes a field's lowerCamelCase name, and a bool
  // written as a string: a key must be written as the .proto names it and a
  // bool as true or false, so that what is stored is what is read.
  if (parsed != nullptr) {
    if (std::string bad = Misread(*parsed, *out.GetDescriptor(), ""); !bad.empty()) return bad;
    return std::nullopt;
  }
  const Result<nlohmann::json> j = ParseJson(text);
  if (!j.ok()) return j.status().message();
  if (std::string bad = Misread(*j, *out.GetDescriptor(), ""); !bad.empty()) return bad;
  return std::nullopt;
}

}  // namespace npuprof::sm
