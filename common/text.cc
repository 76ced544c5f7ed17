#include "common/text.h"

namespace npuprof {

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(kSpace);
  return s.substr(b, e - b + 1);
}

}  // namespace npuprof
