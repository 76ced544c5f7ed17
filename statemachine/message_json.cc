#include "statemachine/message_json.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/wrappers.pb.h>

#include "common/json_depth.h"

namespace npuprof::sm {

namespace pb = google::protobuf;
using nlohmann::json;

namespace {

json Double(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A float as the shortest decimal that reads back as it (0.1f is 0.1, not
// the double 0.100000001...).
json Float(float v) { return std::isfinite(v) ? json(std::stod(fmt::format("{}", v))) : json(nullptr); }

// An enum value by name; a number this build does not know (an open enum
// may hold one) by its number, as the JSON mapping writes it.
json Enum(const pb::FieldDescriptor& f, int number) {
  const pb::EnumValueDescriptor* v = f.enum_type()->FindValueByNumber(number);
  return v ? json(v->name()) : json(number);
}

json PrintedByProtobuf(const pb::Message& m);

// Bytes as the mapping writes them (base64), by protobuf's printer.
json Bytes(std::string bytes) {
  pb::BytesValue wrapped;
  wrapped.set_value(std::move(bytes));
  return PrintedByProtobuf(wrapped);
}

// One value of field f: the singular value, or element i of a repeated field.
json Value(const pb::Message& m, const pb::FieldDescriptor& f, int i) {
  const pb::Reflection& r = *m.GetReflection();
  const bool rep = f.is_repeated();
  switch (f.cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32: return rep ? r.GetRepeatedInt32(m, &f, i) : r.GetInt32(m, &f);
    case pb::FieldDescriptor::CPPTYPE_INT64: return rep ? r.GetRepeatedInt64(m, &f, i) : r.GetInt64(m, &f);
    case pb::FieldDescriptor::CPPTYPE_UINT32: return rep ? r.GetRepeatedUInt32(m, &f, i) : r.GetUInt32(m, &f);
    case pb::FieldDescriptor::CPPTYPE_UINT64: return rep ? r.GetRepeatedUInt64(m, &f, i) : r.GetUInt64(m, &f);
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: return Double(rep ? r.GetRepeatedDouble(m, &f, i) : r.GetDouble(m, &f));
    case pb::FieldDescriptor::CPPTYPE_FLOAT: return Float(rep ? r.GetRepeatedFloat(m, &f, i) : r.GetFloat(m, &f));
    case pb::FieldDescriptor::CPPTYPE_BOOL: return rep ? r.GetRepeatedBool(m, &f, i) : r.GetBool(m, &f);
    case pb::FieldDescriptor::CPPTYPE_ENUM: return Enum(f, rep ? r.GetRepeatedEnumValue(m, &f, i) : r.GetEnumValue(m, &f));
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r.GetRepeatedString(m, &f, i) : r.GetString(m, &f);
      return f.type() == pb::FieldDescriptor::TYPE_BYTES ? Bytes(std::move(s)) : json(std::move(s));
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToJson(rep ? r.GetRepeatedMessage(m, &f, i) : r.GetMessage(m, &f));
  }
  return nullptr;
}

std::string MapKey(const json& key) { return key.is_string() ? key.get<std::string>() : key.dump(); }

// A well-known type (Struct, Value, Timestamp, ...) has a JSON form of its
// own: protobuf's printer writes it.
bool WellKnown(const pb::Descriptor& d) { return d.file()->name().rfind("google/protobuf/", 0) == 0; }

json PrintedByProtobuf(const pb::Message& m) {
  std::string text;
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!pb::util::MessageToJsonString(m, &text, options).ok()) return nullptr;
  Result<json> j = ParseJson(text);
  return j.ok() ? std::move(j).value() : json(nullptr);
}

// google.protobuf.Int64Value and the other wrappers: the JSON of their value.
bool Wrapper(const pb::Descriptor& d) { return d.file()->name() == "google/protobuf/wrappers.proto"; }

}  // namespace

json MessageToJson(const pb::Message& m) {
  const pb::Descriptor& d = *m.GetDescriptor();
  if (Wrapper(d)) return Value(m, *d.field(0), 0);
  if (WellKnown(d)) return PrintedByProtobuf(m);
  json out = json::object();
  const pb::Reflection& r = *m.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const pb::FieldDescriptor& f = *d.field(i);
    if (f.is_map()) {
      json obj = json::object();
      const pb::FieldDescriptor& key = *f.message_type()->map_key();
      const pb::FieldDescriptor& value = *f.message_type()->map_value();
      for (int k = 0; k < r.FieldSize(m, &f); ++k) {
        const pb::Message& entry = r.GetRepeatedMessage(m, &f, k);
        obj[MapKey(Value(entry, key, 0))] = Value(entry, value, 0);
      }
      out[f.name()] = std::move(obj);
    } else if (f.is_repeated()) {
      json arr = json::array();
      for (int k = 0; k < r.FieldSize(m, &f); ++k) arr.push_back(Value(m, f, k));
      out[f.name()] = std::move(arr);
    } else if (!f.has_presence() || r.HasField(m, &f)) {
      out[f.name()] = Value(m, f, 0);
    }
  }
  return out;
}

}  // namespace npuprof::sm
