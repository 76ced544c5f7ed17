#include "common/terminal_text.h"

#include <fmt/format.h>

#include "common/utf8.h"

namespace npuprof {

namespace {

enum class Breaks { kKeep, kEscape };

std::string Escaped(std::string_view raw, Breaks breaks) {
  const std::string s = ToValidUtf8(raw);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\t') {
      if (breaks == Breaks::kKeep) out += static_cast<char>(c);
      else out += c == '\n' ? "\\n" : "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      // U+0080..U+009F (valid UTF-8 here, so the next byte is 0x80..0xBF).
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

std::string TerminalText(std::string_view s) { return Escaped(s, Breaks::kKeep); }

std::string TerminalLine(std::string_view s) { return Escaped(s, Breaks::kEscape); }

std::string TerminalJsonText(std::string_view json_text) {
  const std::string s = ToValidUtf8(json_text);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    // Outside its strings a dump is printable ASCII, spaces and line breaks:
    // these are inside a string (nlohmann writes no raw C0 there itself).
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[i + 1]));
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string TerminalJson(const nlohmann::json& j, int indent) {
  return TerminalJsonText(j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace npuprof
