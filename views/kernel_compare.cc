#include "views/kernel_compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "views/compare_deltas.h"

namespace npuprof::views {

namespace {

using nlohmann::json;

bool Usable(const json& s) { return s.is_object() && !s.contains("error") && s.contains("total_us"); }

double MaxAbs(const json& deltas) {
  double m = 0;
  for (const auto& d : deltas)
    if (d.is_number()) m = std::max(m, std::abs(d.get<double>()));
  return m;
}

const json* ArrayOf(const json& s, const char* key) {
  if (!Usable(s)) return nullptr;
  auto it = s.find(key);
  return it != s.end() && it->is_array() ? &*it : nullptr;
}

std::string Str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json Num(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_number() ? *it : json(nullptr);
}

// Rows keyed by `key_of`, values per run; `absent` is what a usable summary
// that lacks the key holds (0 for by_type, null for top lists).
template <typename KeyOf>
json Rows(const std::vector<json>& summaries, const char* list, KeyOf key_of, const json& absent, bool with_in_top) {
  std::map<std::pair<std::string, std::string>, std::vector<const json*>> rows;
  for (size_t i = 0; i < summaries.size(); ++i) {
    const json* arr = ArrayOf(summaries[i], list);
    if (!arr) continue;
    for (const auto& e : *arr) {
      if (!e.is_object()) continue;
      auto& slot = rows[key_of(e)];
      slot.resize(summaries.size(), nullptr);
      if (!slot[i]) slot[i] = &e;
    }
  }
  std::vector<json> out;
  for (auto& [key, at] : rows) {
    json total = json::array(), count = json::array(), in_top = json::array();
    for (size_t i = 0; i < summaries.size(); ++i) {
      const bool usable = Usable(summaries[i]);
      const json* e = i < at.size() ? at[i] : nullptr;
      total.push_back(e ? Num(*e, "total_us") : usable ? absent : json(nullptr));
      count.push_back(e ? Num(*e, "count") : usable ? absent : json(nullptr));
      in_top.push_back(e != nullptr);
    }
    json row = json::object();
    if (with_in_top) row["name"] = key.first;
    row["type"] = key.second;
    row["count"] = std::move(count);
    AddDeltas(row, total, "delta_us", "delta_pct");
    row["total_us"] = std::move(total);
    if (with_in_top) row["in_top"] = std::move(in_top);
    out.push_back(std::move(row));
  }
  std::stable_sort(out.begin(), out.end(), [](const json& a, const json& b) {
    const double da = MaxAbs(a["delta_us"]), db = MaxAbs(b["delta_us"]);
    if (da != db) return da > db;
    return false;  // map order (name, type) otherwise
  });
  return json(std::move(out));
}

}  // namespace

std::string KernelSummaryStatus(const json& summary) {
  if (summary.is_object() && summary.contains("error")) {
    const json& e = summary["error"];
    return "error: " + (e.is_string() ? e.get<std::string>() : e.dump());
  }
  return Usable(summary) ? "ok" : "no summary";
}

json CompareKernelSummaries(const std::vector<json>& summaries, size_t max_movers) {
  json out = json::object();
  json statuses = json::array(), totals = json::array();
  for (const auto& s : summaries) {
    statuses.push_back(KernelSummaryStatus(s));
    totals.push_back(Usable(s) ? Num(s, "total_us") : json(nullptr));
  }
  out["statuses"] = std::move(statuses);
  json total_row = json::object();
  AddDeltas(total_row, totals, "delta_us", "delta_pct");
  total_row["values_us"] = std::move(totals);
  out["total_us"] = std::move(total_row);
  out["by_type"] = Rows(summaries, "by_type", [](const json& e) { return std::make_pair(std::string(), Str(e, "type")); },
                        json(0), false);
  json movers = Rows(summaries, "top", [](const json& e) { return std::make_pair(Str(e, "name"), Str(e, "type")); },
                     json(nullptr), true);
  if (movers.size() > max_movers) movers.erase(movers.begin() + static_cast<std::ptrdiff_t>(max_movers), movers.end());
  out["top_movers"] = std::move(movers);
  return out;
}

}  // namespace npuprof::views
