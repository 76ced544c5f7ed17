#include "common/json_shape.h"

namespace npuprof {

using nlohmann::json;

bool HasShape(const json& v, JsonShape shape) {
  switch (shape) {
    case JsonShape::kString: return v.is_string();
    case JsonShape::kObject: return v.is_object();
    case JsonShape::kArray: return v.is_array();
    case JsonShape::kBool: return v.is_boolean();
    case JsonShape::kUnsigned: return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    case JsonShape::kInteger: return v.is_number_integer();
  }
  return false;
}

const char* ShapeWords(JsonShape shape) {
  switch (shape) {
    case JsonShape::kString: return "a string";
    case JsonShape::kObject: return "an object";
    case JsonShape::kArray: return "an array";
    case JsonShape::kBool: return "true or false";
    case JsonShape::kUnsigned: return "a whole number >= 0";
    case JsonShape::kInteger: return "a whole number";
  }
  return "?";
}

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

}  // namespace npuprof
