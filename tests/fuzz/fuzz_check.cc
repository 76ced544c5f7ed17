#include "tests/fuzz/fuzz_check.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/utf8.h"

namespace npuprof::fuzz {
namespace {

std::atomic<bool> throw_on_violation{false};

// At most 300 bytes of s, every byte outside printable ASCII as \xNN.
std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 300)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

void CheckNumbers(const nlohmann::json& j, std::string_view what) {
  switch (j.type()) {
    case nlohmann::json::value_t::number_float:
      FUZZ_CHECK(std::isfinite(j.get<double>()), "{}: a non-finite number", what);
      break;
    case nlohmann::json::value_t::array:
    case nlohmann::json::value_t::object:
      for (const auto& child : j) CheckNumbers(child, what);
      break;
    default:
      break;
  }
}

}  // namespace

void ThrowOnContractViolation(bool on) { throw_on_violation = on; }

void ContractFailed(const char* file, int line, const std::string& what) {
  const std::string message = fmt::format("{}:{}: broken promise: {}", file, line, what);
  if (throw_on_violation) throw ContractViolation(message);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void CheckError(const Status& status, std::string_view what) {
  FUZZ_CHECK(!status.ok(), "{}: not an error", what);
  FUZZ_CHECK(!status.message().empty(), "{}: an error without a message", what);
  FUZZ_CHECK(IsValidUtf8(status.message()), "{}: the error message is not valid UTF-8: {}", what,
             Printable(status.message()));
  FUZZ_CHECK(status.message().size() <= 2048, "{}: a {}-byte error message", what, status.message().size());
}

void CheckJson(const nlohmann::json& doc, std::string_view what) {
  std::string text;
  try {
    text = doc.dump();
  } catch (const nlohmann::json::exception& e) {
    FUZZ_CHECK(false, "{}: dump() threw: {}", what, e.what());
  }
  CheckNumbers(doc, what);
  const nlohmann::json back = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!back.is_discarded(), "{}: its own dump() does not parse", what);
  FUZZ_CHECK(back == doc, "{}: dump() and parse() do not give the same document back", what);
}

}  // namespace npuprof::fuzz
