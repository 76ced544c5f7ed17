#include "common/json_depth.h"

#include <fmt/format.h>

#include "common/utf8.h"

namespace npuprof {

namespace {

using json = nlohmann::json;

// Thrown from the parser's callback: nlohmann unwinds its own state, and the
// part built so far (at most max_depth levels) is destroyed.
struct TooDeep {};

}  // namespace

std::string TooDeepText(int max_depth) {
  return fmt::format("nested deeper than {} levels (npuprof reads JSON at most {} levels deep)", max_depth,
                     max_depth);
}

Result<json> ParseJson(std::string_view text, int max_depth) {
  try {
    return json::parse(text.begin(), text.end(), [max_depth](int depth, json::parse_event_t event, json&) {
      // depth = the containers open around the one that starts here.
      if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
          depth >= max_depth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    return Status::Invalid(TooDeepText(max_depth));
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond a double ("1e999").
    return Status::Invalid("not valid JSON: " + TruncateUtf8(e.what(), 200));
  }
}

}  // namespace npuprof
