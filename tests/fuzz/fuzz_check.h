// What a fuzz target promises and how a broken promise is reported.
//
// A fuzz target (tests/fuzz/fuzz_targets.h) feeds one input to a parser and
// checks the parser's contract with FUZZ_CHECK: not only "no crash", but what
// a successful parse guarantees (finite numbers, sizes within the input, JSON
// that serialises and parses back to itself, ...). A failed check is a
// finding: under libFuzzer it prints the broken promise and aborts (libFuzzer
// saves the input); under the replay test it throws ContractViolation so the
// test names the input and goes on. An exception that escapes a parser is a
// finding too: the targets never catch one.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/status.h"

namespace npuprof::fuzz {

// One input in, 0 out (libFuzzer's convention); a broken promise never returns.
using Target = int (*)(const uint8_t* data, size_t size);

struct ContractViolation : std::logic_error {
  using std::logic_error::logic_error;
};

// Default: print to stderr and abort. The replay test switches to throwing.
void ThrowOnContractViolation(bool on);
[[noreturn]] void ContractFailed(const char* file, int line, const std::string& what);

#define FUZZ_CHECK(cond, ...)                                                                  \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ::npuprof::fuzz::ContractFailed(__FILE__, __LINE__,                                      \
                                      std::string(#cond) + ": " + fmt::format(__VA_ARGS__));   \
    }                                                                                          \
  } while (0)

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The promise of every JSON projection of remote bytes: dump() does not throw
// (every string is valid UTF-8), every number in it is finite, and parsing
// the text gives back the same document. `what` names the projection.
void CheckJson(const nlohmann::json& doc, std::string_view what);

// The promise of every error: a message, valid UTF-8 (it travels in events
// and protobuf strings), that quotes the input only in part.
void CheckError(const Status& status, std::string_view what);

// True when `s` is a substring of `whole` (by content, anywhere).
inline bool Within(std::string_view s, std::string_view whole) {
  return whole.find(s) != std::string_view::npos;
}

}  // namespace npuprof::fuzz
