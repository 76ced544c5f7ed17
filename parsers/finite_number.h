// Numbers read from remote text. A number a parser keeps is finite and within
// ±2^63 (the range of the 64-bit counters msprof, npu-smi and vLLM print), so
// sums and differences of them stay finite downstream. Text that spells a
// number outside that range — "inf", "nan", "1e999", an underflow like
// "1e-400", or "1e30" — is told apart from text that is no number at all
// ("N/A", ""), because a parser refuses the first and may skip the second.
// Pure.
#pragma once

#include <string_view>

namespace npuprof {

// 2^63: the largest magnitude a kept number may have.
inline constexpr double kMaxNumberMagnitude = 9223372036854775808.0;

struct ParsedNumber {
  enum Kind {
    kNumber,      // `value` holds it
    kNotANumber,  // the text is not a decimal number
    kOutOfRange,  // a number, but not finite or beyond ±2^63
  };
  Kind kind = kNotANumber;
  double value = 0;
};

// The whole of `s` as a decimal number ("12", "-1", "+3.5", "1.2e3");
// nothing may precede or follow it (the caller trims).
ParsedNumber ParseFiniteNumber(std::string_view s);

}  // namespace npuprof
