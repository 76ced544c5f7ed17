// The nesting-limited JSON reader (common/json_depth.h) on any bytes, with
// the limits the boundaries use and a small one taken from the input.
// Promises: it never throws; it reads exactly the documents nlohmann
// accepts whose nesting (counted here without a parser) is within the limit;
// what it reads dumps and parses back to itself; its refusals are short
// valid-UTF-8 messages, and a refusal for depth names the limit.
#include <algorithm>

#include "common/json_depth.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

// The deepest nesting of containers in text, counted on the bytes (strings
// and their escapes skipped). Meaningful for text that is JSON. A NUL byte
// outside a string ends the count: nlohmann's lexer reads it as the end of
// the input (found by this target: `"kind"\0[[[[` is the document "kind").
size_t NestingOf(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (!in_string && c == '\0') break;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

void CheckOne(std::string_view text, int max_depth) {
  const Result<nlohmann::json> r = ParseJson(text, max_depth);
  const bool accepted = nlohmann::json::accept(text);
  const size_t nesting = accepted ? NestingOf(text) : 0;
  const bool within = nesting <= static_cast<size_t>(max_depth);
  FUZZ_CHECK(r.ok() == (accepted && within), "limit {}: ok={} but accept={} and nesting {}", max_depth, r.ok(),
             accepted, nesting);
  if (r.ok()) {
    CheckJson(*r, "ParseJson");
    return;
  }
  CheckError(r.status(), "ParseJson");
  if (accepted && !within)
    FUZZ_CHECK(r.status().message() == TooDeepText(max_depth), "a refusal for depth says: {}",
               r.status().message());
}

}  // namespace

int FuzzJsonDepth(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  CheckOne(text, kMaxJsonDepth);
  CheckOne(text, kMaxOwnJsonDepth);
  CheckOne(text, kMaxTargetJsonDepth);
  // A small limit, so that short inputs reach it: the first byte picks it.
  if (size > 0) CheckOne(text.substr(1), data[0] % 8);
  return 0;
}

}  // namespace npuprof::fuzz
