// Where a run's round trips were spent: each turn the latency relay counted
// (tests/support/latency_relay.h, the wall-clock ms of the answer's first
// chunk) placed against the run's task attempts (from its events: kind,
// scheduled, ended). A turn while n attempts were in flight counts 1/n to
// each one's kind; a turn inside the run but outside every attempt counts
// to kBetweenTasks (the broker's turns, a worker picking a task up);
// turns outside [from_ms, to_ms] are not the run's.
//
// Turns over-count where one side streams (a bulk read answered by window
// adjustments) or several channels talk at once, so the benchmark also
// compares time: SpanSecondsByKind is how long attempts of each kind were in
// flight (a kind's overlapping attempts counted once); what a kind gained
// at RTT r against RTT 0, divided by r, is the round trips it waited for
// one after another. Pure; header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <map>
#include <string>
#include <vector>

namespace npuprof::bench {

inline constexpr const char* kBetweenTasks = "(between tasks)";

struct TaskSpan {
  std::string kind;
  int64_t start_ms = 0, end_ms = 0;  // inclusive
};

inline std::map<std::string, double> TurnsByTaskKind(const std::vector<int64_t>& turn_ms,
                                                     const std::vector<TaskSpan>& spans, int64_t from_ms,
                                                     int64_t to_ms) {
  std::map<std::string, double> out;
  for (const int64_t t : turn_ms) {
    if (t < from_ms || t > to_ms) continue;
    std::vector<const TaskSpan*> in_flight;
    for (const auto& s : spans)
      if (s.start_ms <= t && t <= s.end_ms) in_flight.push_back(&s);
    if (in_flight.empty()) {
      out[kBetweenTasks] += 1;
      continue;
    }
    for (const TaskSpan* s : in_flight) out[s->kind] += 1.0 / static_cast<double>(in_flight.size());
  }
  return out;
}

// Seconds during which at least one attempt of each kind was in flight.
inline std::map<std::string, double> SpanSecondsByKind(const std::vector<TaskSpan>& spans) {
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> by_kind;
  for (const auto& s : spans) by_kind[s.kind].emplace_back(s.start_ms, s.end_ms);
  std::map<std::string, double> out;
  for (auto& [kind, v] : by_kind) {
    std::sort(v.begin(), v.end());
    int64_t total = 0, cur_start = v.front().first, cur_end = v.front().second;
    for (const auto& [start, end] : v) {
      if (start > cur_end) {
        total += cur_end - cur_start;
        cur_start = start;
      }
      cur_end = std::max(cur_end, end);
    }
    total += cur_end - cur_start;
    out[kind] = static_cast<double>(total) / 1000.0;
  }
  return out;
}

}  // namespace npuprof::bench
