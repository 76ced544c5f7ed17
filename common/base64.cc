#include "common/base64.h"

#include <fmt/format.h>

namespace npuprof {

namespace {

int Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

Result<std::string> DecodeBase64(std::string_view text) {
  if (text.size() % 4 != 0)
    return Status::Corruption(fmt::format("base64 text of {} characters is not whole 4-character groups", text.size()));
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int pad = 0;
    if (last) pad = (text[i + 3] == '=') + (text[i + 3] == '=' && text[i + 2] == '=');
    uint32_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (k >= 4 - static_cast<size_t>(pad)) {
        v <<= 6;
        continue;
      }
      const int d = Value(c);
      if (d < 0) return Status::Corruption(fmt::format("base64 text has a character out of the alphabet at offset {}", i + k));
      v = (v << 6) | static_cast<uint32_t>(d);
    }
    if ((pad == 1 && (v & 0xFF) != 0) || (pad == 2 && (v & 0xFFFF) != 0))
      return Status::Corruption(fmt::format("base64 text has bits set after its last byte at offset {}", i));
    out.push_back(static_cast<char>((v >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xFF));
  }
  return out;
}

}  // namespace npuprof
