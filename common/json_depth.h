// JSON from outside read with a nesting limit: the one parser every boundary
// uses (client requests, worker messages, the server's answers, imported and
// stored events, files and answers from targets).
//
// Why: nlohmann parses iteratively, but copying, comparing, dumping and every
// walk of the parsed value recurse once per level, so a 200 KB document nested
// 100,000 levels deep overflows the stack of whoever touches it next. The
// limit is checked while the text is parsed (the parser's callback sees the
// depth of every container it opens), so a too-deep document is refused
// before any value of it is built deeper than the limit and before any
// recursive walk.
//
// Contract: ParseJson never throws. Depth counts containers: `1` is 0 levels
// deep, `[]` and `{}` 1, `[[1]]` 2. A document deeper than max_depth is
// InvalidArgument "nested deeper than N levels (...)"; text that is not
// JSON (or holds a number beyond a double) is InvalidArgument "not valid
// JSON: ..."; callers prefix what they read. Pure.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof {

// What a peer sends: client requests (an import's events among them),
// worker results, an import file.
inline constexpr int kMaxJsonDepth = 128;
// What npuprof wrote itself around what it took in: stored events read back,
// the server's answers read by the CLI. An event or an answer wraps a peer's
// document in a few levels of its own, so a document accepted at
// kMaxJsonDepth never becomes unreadable later (a run whose events cannot be
// read back is not served).
inline constexpr int kMaxOwnJsonDepth = 2 * kMaxJsonDepth;
// Files and HTTP answers from targets: lower, so that what a handler copies
// from them into a result still fits, inside its result envelope, under
// kMaxJsonDepth.
inline constexpr int kMaxTargetJsonDepth = 64;

Result<nlohmann::json> ParseJson(std::string_view text, int max_depth = kMaxJsonDepth);

// ParseJson's refusal text for a document deeper than max_depth (for tests
// and for callers that say it in their own words).
std::string TooDeepText(int max_depth);

}  // namespace npuprof
