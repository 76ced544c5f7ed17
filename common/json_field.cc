#include "common/json_field.h"

namespace npuprof {

using nlohmann::json;

const json& Field(const json& j, std::string_view key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string StrField(const json& j, std::string_view key, std::string_view fallback) {
  const json& v = Field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string(fallback);
}

std::optional<double> NumField(const json& j, std::string_view key) {
  const json& v = Field(j, key);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

std::optional<int64_t> IntField(const json& j, std::string_view key) {
  const json& v = Field(j, key);
  if (!v.is_number_integer()) return std::nullopt;
  return v.get<int64_t>();
}

const json& ArrField(const json& j, std::string_view key) {
  static const json kEmpty = json::array();
  const json& v = Field(j, key);
  return v.is_array() ? v : kEmpty;
}

}  // namespace npuprof
