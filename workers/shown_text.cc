#include "workers/shown_text.h"

#include "common/utf8.h"

namespace npuprof::workers {

nlohmann::json ValidUtf8Json(nlohmann::json j) {
  if (j.is_string()) return ToValidUtf8(j.get_ref<const std::string&>());
  if (j.is_array()) {
    for (auto& e : j) e = ValidUtf8Json(std::move(e));
    return j;
  }
  if (!j.is_object()) return j;
  nlohmann::json out = nlohmann::json::object();
  for (auto& [k, v] : j.items()) out[ToValidUtf8(k)] = ValidUtf8Json(std::move(v));
  return out;
}

std::string ResultJsonText(const nlohmann::json& j) {
  try {
    return j.dump();
  } catch (const nlohmann::json::type_error&) {  // 316: invalid UTF-8 somewhere in j
    return ValidUtf8Json(j).dump();
  }
}

}  // namespace npuprof::workers
