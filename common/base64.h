// Strict base64 decoding (RFC 4648 alphabet, '=' padding) of text that
// came from elsewhere, e.g. a remote program's output. Pure.
//
// The input must be whole 4-character groups of the standard alphabet,
// padded with at most two '=' in the last group; anything else (another
// character, whitespace, a short group, padding in the middle, non-zero
// bits after the last byte) is kCorruption naming the offset, and nothing
// is decoded. The empty string decodes to the empty string.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace npuprof {

Result<std::string> DecodeBase64(std::string_view text);

}  // namespace npuprof
