#include "common/utf8.h"

namespace npuprof {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of the valid UTF-8 sequence starting at s[i], or 0 when the bytes
// there do not start one. *maximal_invalid receives how many bytes form the
// maximal invalid subpart (at least 1) when 0 is returned.
size_t SequenceAt(std::string_view s, size_t i, size_t* maximal_invalid) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  *maximal_invalid = 1;
  if (b0 < 0x80) return 1;
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) {
      *maximal_invalid = k;
      return 0;
    }
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      *maximal_invalid = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = SequenceAt(s, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string ToValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = SequenceAt(s, i, &bad);
    if (n == 0) {
      out += kReplacement;
      i += bad;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

std::string TruncateUtf8(std::string_view s, size_t max_bytes, std::string_view marker) {
  std::string valid = ToValidUtf8(s);
  if (valid.size() <= max_bytes) return valid;
  size_t cut = max_bytes;
  // Back up over continuation bytes so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(valid[cut]) & 0xC0) == 0x80) --cut;
  valid.resize(cut);
  valid += marker;
  return valid;
}

}  // namespace npuprof
