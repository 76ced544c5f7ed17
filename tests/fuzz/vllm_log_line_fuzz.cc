// SplitVllmLogLine on every piece of the input (split on '\n' and '\r', as
// ParseVllmLog does). Promises: colour codes are removed (no ESC is left) and
// the text never grows; prefix and message are parts of the text; the level
// is one of the known words or empty; a prefix names a pid.
#include <array>

#include "parsers/vllm_log_line.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

void CheckLine(std::string_view raw) {
  const parsers::VllmLogLine l = parsers::SplitVllmLogLine(raw);
  FUZZ_CHECK(l.text.size() <= raw.size(), "the text grew from {} to {} bytes", raw.size(), l.text.size());
  FUZZ_CHECK(l.text.find('\x1b') == std::string::npos, "an ESC is left in the text");
  FUZZ_CHECK(Within(l.message, l.text), "the message is not part of the text");
  FUZZ_CHECK(Within(l.prefix, l.text), "the prefix is not part of the text");
  FUZZ_CHECK(l.prefix.empty() || l.prefix.find("pid=") != std::string::npos, "prefix '{}' names no pid",
             l.prefix);
  static constexpr std::array<std::string_view, 7> kLevels = {"", "DEBUG", "INFO", "WARNING", "ERROR",
                                                              "CRITICAL", "WARN"};
  bool known = false;
  for (auto level : kLevels) known = known || l.level == level;
  FUZZ_CHECK(known, "unknown level '{}'", l.level);
  FUZZ_CHECK(parsers::StripAnsi(raw) == l.text, "the text is not StripAnsi of the line");
}

}  // namespace

int FuzzVllmLogLine(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string_view::npos) end = text.size();
    CheckLine(text.substr(start, end - start));
    start = end + 1;
  }
  return 0;
}

}  // namespace npuprof::fuzz
