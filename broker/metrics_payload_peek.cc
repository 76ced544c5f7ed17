#include "broker/metrics_payload_peek.h"

namespace npuprof::metrics {

namespace {

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }
  void SkipSpace() {
    while (!done() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++i_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (done() || peek() != c) return false;
    ++i_;
    return true;
  }
  // At a '"': the raw contents of the string; the cursor ends after its closing quote.
  std::optional<std::string_view> String() {
    if (done() || peek() != '"') return std::nullopt;
    const size_t start = ++i_;
    while (!done()) {
      const char c = s_[i_++];
      if (c == '\\') {
        if (done()) return std::nullopt;
        ++i_;
      } else if (c == '"') {
        return s_.substr(start, i_ - 1 - start);
      }
    }
    return std::nullopt;
  }
  // The raw text of one value (string contents for a string).
  std::optional<std::string_view> Value() {
    SkipSpace();
    if (done()) return std::nullopt;
    if (peek() == '"') return String();
    const size_t start = i_;
    if (peek() == '{' || peek() == '[') {
      int depth = 0;
      while (!done()) {
        const char c = peek();
        if (c == '"') {
          if (!String()) return std::nullopt;
          continue;
        }
        ++i_;
        if (c == '{' || c == '[') ++depth;
        else if ((c == '}' || c == ']') && --depth == 0) return s_.substr(start, i_ - start);
      }
      return std::nullopt;
    }
    while (!done() && peek() != ',' && peek() != '}' && peek() != ']' && peek() != ' ' && peek() != '\t' &&
           peek() != '\n' && peek() != '\r')
      ++i_;
    if (i_ == start) return std::nullopt;
    return s_.substr(start, i_ - start);
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<std::string_view> PeekTopLevel(std::string_view json_object, std::string_view key) {
  Cursor c(json_object);
  if (!c.Eat('{')) return std::nullopt;
  if (c.Eat('}')) return std::nullopt;
  while (true) {
    c.SkipSpace();
    const auto name = c.String();
    if (!name || !c.Eat(':')) return std::nullopt;
    const auto value = c.Value();
    if (!value) return std::nullopt;
    if (*name == key) return value;
    if (c.Eat(',')) continue;
    return std::nullopt;  // '}' (no such member) or malformed
  }
}

}  // namespace npuprof::metrics
