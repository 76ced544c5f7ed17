#include "statemachine/device_ids.h"

#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace npuprof::sm {

Result<DeviceIds> ParseDeviceIdText(std::string_view text) {
  DeviceIds out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view part = text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    bool digits = !part.empty() && part.size() <= 4;
    for (char c : part) digits = digits && c >= '0' && c <= '9';
    const int value = digits ? std::stoi(std::string(part)) : -1;
    if (!digits || value > kMaxDeviceId)
      return Status::Invalid(fmt::format("devices '{}' is not a list of device indices: '{}' is no index 0..{}; use "
                                         "e.g. --devices 0,1",
                                         text, part, kMaxDeviceId));
    out.push_back(value);
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

Result<DeviceIds> DeviceIdsFromJson(const nlohmann::json& ids, std::string_view what) {
  if (!ids.is_array())
    return Status::Invalid(fmt::format("{} must be a list of device indices, e.g. [0,1], not {}", what, ids.dump()));
  DeviceIds out;
  for (const auto& x : ids) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > kMaxDeviceId)
      return Status::Invalid(
          fmt::format("{} {} holds {}: device indices are integers 0..{}", what, ids.dump(), x.dump(), kMaxDeviceId));
    out.push_back(static_cast<DeviceId>(x.get<int64_t>()));
  }
  return out;
}

DeviceIds DeviceIdsOrThrow(const nlohmann::json& ids, std::string_view what) {
  auto r = DeviceIdsFromJson(ids, what);
  if (!r.ok()) throw std::invalid_argument(r.status().message());
  return std::move(r).value();
}

nlohmann::json DeviceIdsJson(const DeviceIds& ids) { return nlohmann::json(ids); }

std::string DeviceIdsText(const DeviceIds& ids) { return fmt::format("{}", fmt::join(ids, ",")); }

}  // namespace npuprof::sm
