// A strict validator of Chrome Trace Event documents (test helper), stricter
// than the viewers: what it accepts, Perfetto UI and chrome://tracing open
// without import errors.
//
// Rules checked, each violation reported with the event's index:
//  * the text parses as JSON; the top level is an object with a
//    "traceEvents" array (or a bare array of events);
//  * every event is an object with a non-empty "name", a "ph" among X B E i
//    I C M, an integer "pid" and "tid"; "args", when present, is an object;
//  * every event but M has a finite "ts" >= 0; X has a finite "dur" >= 0;
//    i/I have "s" among g p t when present; C has non-empty numeric args;
//  * M is process_name / thread_name (args.name a string), process_labels,
//    or process_sort_index / thread_sort_index (args.sort_index an integer);
//  * B/E pair up per (pid, tid) (an E closes the innermost open B, with the
//    same name when it has one) and none is left open;
//  * per track — (pid, tid) for X B E i I, (pid, name) for C — ts never
//    decreases in document order, and X spans nest (a span that starts
//    inside another ends inside it);
//  * every pid used is named by process_name and every (pid, tid) with
//    slices or instants by thread_name.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::testing {

struct TraceCheck {
  std::vector<std::string> problems;  // empty: valid
  std::map<std::string, int> phase_counts;
  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  std::set<std::string> counter_names;
  nlohmann::json events = nlohmann::json::array();  // the parsed event list
  bool ok() const { return problems.empty(); }
};

TraceCheck ValidateChromeTrace(const std::string& text);

}  // namespace npuprof::testing
