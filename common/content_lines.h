// The line walk of npuprof's small text files (key files, the allow-list):
// every line trimmed, blank lines and lines starting with '#' skipped, line
// numbers from 1 for error messages. Pure.
#pragma once

#include <functional>
#include <string_view>

#include "common/status.h"
#include "common/text.h"

namespace npuprof {

// Calls fn(line number, trimmed line) for each content line of text; stops
// at, and returns, the first error fn returns.
inline Status ForEachContentLine(std::string_view text, const std::function<Status(int, std::string_view)>& fn) {
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = Trim(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    if (Status s = fn(line_no, line); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace npuprof
