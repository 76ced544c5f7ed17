#include "parsers/vllm_log_line.h"

#include <array>
#include <cctype>
#include <optional>

#include "common/text.h"

namespace npuprof::parsers {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// Length of "<params>m" at s[i..] where params are [0-9;]; 0 when absent.
size_t SgrTail(std::string_view s, size_t i, bool need_digit) {
  size_t j = i;
  bool digit = false;
  while (j < s.size() && (IsDigit(s[j]) || s[j] == ';')) {
    digit = digit || IsDigit(s[j]);
    ++j;
  }
  if (j < s.size() && s[j] == 'm' && (digit || !need_digit)) return j + 1 - i;
  return 0;
}

// "DD-DD DD:DD:DD" at s[i..].
bool IsTimestamp(std::string_view s, size_t i) {
  static constexpr std::string_view kShape = "00-00 00:00:00";
  if (i + kShape.size() > s.size()) return false;
  for (size_t k = 0; k < kShape.size(); ++k) {
    const char want = kShape[k];
    if (want == '0' ? !IsDigit(s[i + k]) : s[i + k] != want) return false;
  }
  return true;
}

struct Anchor {
  size_t begin;          // where the level word starts
  size_t message_begin;  // where the message starts
  std::string_view level;
};

// Finds the first "LEVEL MM-DD HH:MM:SS" anywhere in the line (pasted logs
// carry docker-compose, k9s, DJL or VLLM_LOGGING_PREFIX text in front), or a
// uvicorn "LEVEL:  ".
std::optional<Anchor> FindAnchor(std::string_view s) {
  static constexpr std::array<std::string_view, 6> kLevels = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "WARN"};
  std::optional<Anchor> best;
  for (auto level : kLevels) {
    for (size_t pos = s.find(level); pos != std::string_view::npos; pos = s.find(level, pos + 1)) {
      if (best && pos >= best->begin) break;
      if (pos > 0 && (IsAlnum(s[pos - 1]) || s[pos - 1] == '_')) continue;
      const size_t after = pos + level.size();
      if (after < s.size() && s[after] == ' ' && IsTimestamp(s, after + 1)) {
        size_t msg = after + 1 + 14;
        // Skip "[file:line] " (v0.7.3+) or "file:line] " (older), when present.
        const size_t close = s.find("] ", msg);
        const size_t eol_close =
            (close == std::string_view::npos && !s.empty() && s.back() == ']') ? s.size() - 1 : close;
        if (eol_close != std::string_view::npos && eol_close - msg < 160) {
          msg = eol_close + 1;
        }
        while (msg < s.size() && s[msg] == ' ') ++msg;
        best = Anchor{pos, msg, level};
        break;
      }
      // uvicorn pads the level: "INFO:     ", "WARNING:  ", "ERROR:    " (colon, >= 2 spaces).
      if (after + 2 < s.size() && s[after] == ':' && s[after + 1] == ' ' && s[after + 2] == ' ') {
        size_t msg = after + 1;
        while (msg < s.size() && s[msg] == ' ') ++msg;
        best = Anchor{pos, msg, level};
        break;
      }
    }
  }
  return best;
}

// Innermost "(... pid=N ...)" group in `region`; "" when none.
std::string LastPrefix(std::string_view region) {
  std::string found;
  size_t pos = 0;
  while ((pos = region.find('(', pos)) != std::string_view::npos) {
    const size_t close = region.find(')', pos + 1);
    if (close == std::string_view::npos) break;
    const auto inner = region.substr(pos + 1, close - pos - 1);
    if (inner.find("pid=") != std::string_view::npos && inner.find('(') == std::string_view::npos) {
      found = std::string(inner);
    }
    pos = close + 1;
  }
  return found;
}

// For lines without a level: the leading run of "(... pid=...)" groups.
// Returns the innermost prefix and sets `rest` to what follows the run.
std::string LeadingPrefix(std::string_view line, std::string_view& rest) {
  std::string found;
  std::string_view s = Trim(line);
  while (!s.empty() && s.front() == '(') {
    const size_t close = s.find(')');
    if (close == std::string_view::npos) break;
    const auto inner = s.substr(1, close - 1);
    if (inner.find("pid=") == std::string_view::npos) break;
    found = std::string(inner);
    s = Trim(s.substr(close + 1));
  }
  rest = s;
  return found;
}

}  // namespace

std::string StripAnsi(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  if (s.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 BOM
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\x1b') {
      // ESC [ params final-byte (SGR 'm', cursor moves 'A', 'K', ...); a lone ESC is dropped.
      size_t j = i + 1;
      if (j < s.size() && s[j] == '[') {
        ++j;
        while (j < s.size() && (IsDigit(s[j]) || s[j] == ';' || s[j] == '?')) ++j;
        if (j < s.size()) ++j;
      }
      i = j;
      continue;
    }
    if (c == '#' && s.substr(i, 5) == "#033[") {  // syslog-escaped ESC
      if (size_t n = SgrTail(s, i + 5, false)) {
        i += 5 + n;
        continue;
      }
    }
    if (c == '^' && s.substr(i, 3) == "^[[") {  // `cat -v` form
      if (size_t n = SgrTail(s, i + 3, false)) {
        i += 3 + n;
        continue;
      }
    }
    if (c == '[') {  // bare "[1;36m" left once the ESC was stripped
      if (size_t n = SgrTail(s, i + 1, true)) {
        i += 1 + n;
        continue;
      }
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

VllmLogLine SplitVllmLogLine(std::string_view raw) {
  VllmLogLine line;
  line.text = StripAnsi(raw);
  const std::string_view text = line.text;
  if (auto anchor = FindAnchor(text)) {
    line.level = std::string(anchor->level);
    line.prefix = LastPrefix(text.substr(0, anchor->begin));
    line.message = std::string(Trim(text.substr(anchor->message_begin)));
    return line;
  }
  std::string_view rest;
  line.prefix = LeadingPrefix(text, rest);
  line.message = std::string(rest);
  return line;
}

}  // namespace npuprof::parsers
