#include "views/compare_deltas.h"

#include <cmath>

namespace npuprof::views {

void AddDeltas(nlohmann::json& row, const nlohmann::json& values, const char* delta_key, const char* pct_key) {
  using nlohmann::json;
  auto r3 = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  json d = json::array(), p = json::array();
  const json& a = values.empty() ? json() : values[0];
  for (const auto& v : values) {
    if (!a.is_number() || !v.is_number()) {
      d.push_back(nullptr);
      p.push_back(nullptr);
      continue;
    }
    const double delta = v.get<double>() - a.get<double>();
    d.push_back(r3(delta));
    p.push_back(a.get<double>() != 0 ? json(r3(delta / a.get<double>() * 100.0)) : json(nullptr));
  }
  row[delta_key] = std::move(d);
  row[pct_key] = std::move(p);
}

}  // namespace npuprof::views
