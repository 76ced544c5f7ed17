// Bytes from a target are bytes. This is the one place where bytes become
// text for people: fields shown in JSON, logs and reports are made valid
// UTF-8 here, every invalid sequence replaced by U+FFFD. Evidence blobs keep
// the exact bytes and never pass through here. Pure.
#pragma once

#include <string>
#include <string_view>

namespace npuprof {

// True when s is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// s with every maximal invalid subsequence replaced by U+FFFD ("\xEF\xBF\xBD"),
// following the W3C/Unicode "substitution of maximal subparts" practice. Valid
// input comes back unchanged.
std::string ToValidUtf8(std::string_view s);

// At most max_bytes of s, cut at a character boundary of the valid-UTF-8 form
// (ToValidUtf8 first), with `marker` appended when something was cut.
std::string TruncateUtf8(std::string_view s, size_t max_bytes, std::string_view marker = "…");

}  // namespace npuprof
