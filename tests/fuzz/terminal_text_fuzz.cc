// Text for a terminal (common/terminal_text.h) on any bytes. Promises: the
// result is valid UTF-8 holding no control character a terminal obeys (C0
// but line feed and tab, DEL, C1), TerminalLine's no line feed or tab
// either; escaping what is escaped changes nothing; text without control
// characters comes back as it went in; and JSON text stays the same JSON.
#include <tuple>

#include "common/terminal_text.h"
#include "common/utf8.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

// The first control character a terminal would obey in s, or npos.
size_t RawControlAt(std::string_view s, bool breaks_allowed) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 && !(breaks_allowed && (c == '\n' || c == '\t'))) return i;
    if (c == 0x7f) return i;
    if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9F)
      return i;
  }
  return std::string_view::npos;
}

}  // namespace

int FuzzTerminalText(const uint8_t* data, size_t size) {
  const std::string_view bytes = AsText(data, size);
  const std::string text = TerminalText(bytes);
  const std::string line = TerminalLine(bytes);
  for (const auto& [shown, breaks, what] :
       {std::tuple{std::string_view(text), true, "TerminalText"}, std::tuple{std::string_view(line), false, "TerminalLine"}}) {
    FUZZ_CHECK(IsValidUtf8(shown), "{} is not valid UTF-8", what);
    const size_t at = RawControlAt(shown, breaks);
    FUZZ_CHECK(at == std::string_view::npos, "{} holds byte {:#x} raw at {}", what,
               static_cast<unsigned char>(shown[at]), at);
  }
  FUZZ_CHECK(TerminalText(text) == text, "TerminalText is not idempotent");
  FUZZ_CHECK(TerminalLine(line) == line, "TerminalLine is not idempotent");
  const std::string valid = ToValidUtf8(bytes);
  if (RawControlAt(valid, true) == std::string_view::npos && valid.find('\r') == std::string::npos)
    FUZZ_CHECK(text == valid, "text without control characters was changed");
  // The bytes as a JSON string: the same text after the round trip.
  const nlohmann::json j = valid;
  const std::string json_text = TerminalJson(j);
  FUZZ_CHECK(RawControlAt(json_text, true) == std::string_view::npos, "TerminalJson holds a raw control");
  const nlohmann::json back = nlohmann::json::parse(json_text, nullptr, false);
  FUZZ_CHECK(!back.is_discarded() && back == j, "TerminalJson does not parse back to the same string");
  return 0;
}

}  // namespace npuprof::fuzz
