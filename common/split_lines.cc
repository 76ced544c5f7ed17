#include "common/split_lines.h"

namespace npuprof {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string_view::npos) eol = text.size();
    lines.push_back(text.substr(at, eol - at));
    at = eol + 1;
  }
  return lines;
}

}  // namespace npuprof
