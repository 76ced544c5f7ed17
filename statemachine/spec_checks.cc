#include "statemachine/spec_checks.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

namespace npuprof::sm {

bool IsSafeName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Status RequireSafeName(const json& spec, const std::string& field, bool required) {
  if (!spec.contains(field) || spec[field].is_null() || (spec[field].is_string() && spec[field].get<std::string>().empty())) {
    if (required) return Status::Invalid(fmt::format("{} is required: pass --{}", field, field));
    return Status::Ok();
  }
  if (!spec[field].is_string() || !IsSafeName(spec[field].get<std::string>()))
    return Status::Invalid(fmt::format("{} '{}' is not allowed: use 1-64 characters from A-Z a-z 0-9 . _ -", field,
                                       spec[field].is_string() ? spec[field].get<std::string>() : spec[field].dump()));
  return Status::Ok();
}

Status RequireMachineRecord(const json& spec) {
  if (!spec.contains("machine_record") || !spec["machine_record"].is_object())
    return Status::Invalid("machine: the machine is not in the inventory; add it with `npuprof machine add`");
  const json& m = spec["machine_record"];
  for (const char* f : {"host", "user"})
    if (!m.contains(f) || !m[f].is_string() || m[f].get<std::string>().empty())
      return Status::Invalid(fmt::format("machine record lacks {}; re-add the machine", f));
  return Status::Ok();
}

Status CheckIntRange(json& spec, const std::string& field, int64_t def, int64_t lo, int64_t hi) {
  if (!spec.contains(field) || spec[field].is_null()) {
    spec[field] = def;
    return Status::Ok();
  }
  if (!spec[field].is_number_integer())
    return Status::Invalid(fmt::format("{} must be an integer between {} and {}", field, lo, hi));
  const int64_t v = spec[field].get<int64_t>();
  if (v < lo || v > hi) return Status::Invalid(fmt::format("{} = {} is out of range: use {}..{}", field, v, lo, hi));
  return Status::Ok();
}

Status NormaliseDeviceList(json& d, int64_t expected, const DeviceListNames& n) {
  if (d.is_null()) return Status::Ok();
  if (d.is_string()) {
    const std::string s = d;
    json arr = json::array();
    std::string cur;
    for (size_t i = 0; i <= s.size(); ++i) {
      if (i == s.size() || s[i] == ',') {
        if (cur.empty() || cur.size() > 4 || !std::all_of(cur.begin(), cur.end(), ::isdigit))
          return Status::Invalid(
              fmt::format("{} '{}' is not a list of device indices: use e.g. {}", n.field, s, n.example));
        arr.push_back(std::stoi(cur));
        cur.clear();
      } else {
        cur.push_back(s[i]);
      }
    }
    d = arr;
  }
  if (!d.is_array()) return Status::Invalid(fmt::format("{} must be a list of device indices, e.g. [0,1], or null", n.field));
  std::set<int64_t> seen;
  for (const auto& x : d) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 4095)
      return Status::Invalid(
          fmt::format("{} {} holds {}: device indices are integers 0..4095", n.field, d.dump(), x.dump()));
    if (!seen.insert(x.get<int64_t>()).second)
      return Status::Invalid(fmt::format("{} {} lists device {} twice", n.field, d.dump(), x.dump()));
  }
  if (static_cast<int64_t>(d.size()) != expected)
    return Status::Invalid(fmt::format("{} lists {} device(s) but {} = {}: give exactly {} (or {})", n.field, d.size(),
                                       n.count_label, expected, expected, n.omit_hint));
  return Status::Ok();
}

}  // namespace npuprof::sm
