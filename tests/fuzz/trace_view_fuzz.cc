// CheckTraceViewJson (a streaming check) against a DOM parse of the same
// bytes. Promises: it accepts exactly the JSON documents that are an array,
// or an object with a "traceEvents" array, and counts their events and
// non-object events as the document holds them. (An object that repeats a
// top-level key is left out of the comparison: the DOM keeps one value.)
#include "parsers/msprof_csv_parser.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

using nlohmann::json;

size_t NonObjects(const json& events) {
  size_t n = 0;
  for (const json& e : events) n += e.is_object() ? 0 : 1;
  return n;
}

}  // namespace

int FuzzTraceView(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  const auto check = CheckTraceViewJson(text);
  if (!check.ok()) CheckError(check.status(), "CheckTraceViewJson");

  size_t top_keys = 0;
  const json doc = json::parse(
      text.begin(), text.end(),
      [&](int depth, json::parse_event_t event, json&) {
        if (event == json::parse_event_t::key && depth == 1) ++top_keys;
        return true;
      },
      /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    FUZZ_CHECK(!check.ok(), "accepted bytes that are not JSON");
    return 0;
  }
  if (doc.is_array()) {
    FUZZ_CHECK(check.ok(), "refused a JSON array: {}", check.status().message());
    FUZZ_CHECK(check->bare_array, "an array not reported as bare");
    FUZZ_CHECK(check->event_count == doc.size(), "{} events counted, the array has {}", check->event_count,
               doc.size());
    FUZZ_CHECK(check->non_object_events == NonObjects(doc), "{} non-objects counted, the array has {}",
               check->non_object_events, NonObjects(doc));
    return 0;
  }
  if (doc.is_object() && doc.size() != top_keys) return 0;  // a repeated key
  const bool has_events = doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array();
  FUZZ_CHECK(check.ok() == has_events, "ok={} for a document with{} a traceEvents array", check.ok(),
             has_events ? "" : "out");
  if (has_events) {
    const json& events = doc["traceEvents"];
    FUZZ_CHECK(!check->bare_array, "an object reported as a bare array");
    FUZZ_CHECK(check->event_count == events.size(), "{} events counted, traceEvents has {}", check->event_count,
               events.size());
    FUZZ_CHECK(check->non_object_events == NonObjects(events), "{} non-objects counted, traceEvents has {}",
               check->non_object_events, NonObjects(events));
  }
  return 0;
}

}  // namespace npuprof::fuzz
