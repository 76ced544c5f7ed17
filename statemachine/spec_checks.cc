#include "statemachine/spec_checks.h"

#include "statemachine/device_ids.h"

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
  // The one device-id parser (device_ids.h): what is not a list of indices is refused here.
  Result<DeviceIds> ids = d.is_string() ? ParseDeviceIdText(d.get<std::string>()) : DeviceIdsFromJson(d, n.field);
  if (!ids.ok()) return ids.status();
  d = DeviceIdsJson(*ids);
  std::set<DeviceId> seen;
  for (DeviceId x : *ids)
    if (!seen.insert(x).second) return Status::Invalid(fmt::format("{} {} lists device {} twice", n.field, d.dump(), x));
  if (static_cast<int64_t>(ids->size()) != expected)
    return Status::Invalid(fmt::format("{} lists {} device(s) but {} = {}: give exactly {} (or {})", n.field, ids->size(),
                                       n.count_label, expected, expected, n.omit_hint));
  return Status::Ok();
}

}  // namespace npuprof::sm
