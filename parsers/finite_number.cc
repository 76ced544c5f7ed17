#include "parsers/finite_number.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace npuprof {

ParsedNumber ParseFiniteNumber(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return {};
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (end != s.data() + s.size()) return {};
  if (ec == std::errc::result_out_of_range) return {ParsedNumber::kOutOfRange, 0};
  if (ec != std::errc()) return {};
  if (!std::isfinite(v) || std::fabs(v) > kMaxNumberMagnitude) return {ParsedNumber::kOutOfRange, 0};
  return {ParsedNumber::kNumber, v};
}

}  // namespace npuprof
