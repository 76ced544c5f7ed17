// The simulated target's own work as it records it (state/timeline.jsonl,
// tests/sim/README.md "The target's own time": one JSON line per piece of
// work, start and end in unix seconds on the target's clock), for the
// whole-installation benchmarks that set npuprof's wall time against it:
// the pieces, their union inside a window (pieces overlap: concurrent
// requests, ranks finalising or analysed at once), and the stretches of a
// window no piece covers (where npuprof's own time is). Header-only; only
// ReadTimeline does I/O.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::bench {

struct TimelinePiece {
  std::string what;
  double start = 0, end = 0;  // unix seconds
  nlohmann::json line;        // the whole record (path, rank, raw_mb, ...)
};

// Lines that are not objects with numeric start and end are passed over
// (a piece being written, a foreign line).
inline std::vector<TimelinePiece> ReadTimeline(const std::string& file) {
  std::vector<TimelinePiece> out;
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("start") || !j.contains("end") || !j["start"].is_number() ||
        !j["end"].is_number())
      continue;
    TimelinePiece p;
    p.what = j.contains("what") && j["what"].is_string() ? j["what"].get<std::string>() : "";
    p.start = j["start"].get<double>();
    p.end = j["end"].get<double>();
    p.line = std::move(j);
    out.push_back(std::move(p));
  }
  return out;
}

// The tools' own start-ups (interpreter, imports, the env script) as the
// simulator records them: "npu_smi", "*_process_start", "torch_npu_import".
inline bool IsToolStartUp(const std::string& what) {
  const std::string suffix = "_process_start";
  return what == "npu_smi" || what == "torch_npu_import" ||
         (what.size() > suffix.size() && what.compare(what.size() - suffix.size(), suffix.size(), suffix) == 0);
}

using PieceFilter = std::function<bool(const TimelinePiece&)>;

// The pieces kept by `keep` (all when empty), cut to [from, to], merged:
// disjoint intervals in time order.
inline std::vector<std::pair<double, double>> MergedPieces(const std::vector<TimelinePiece>& pieces, double from,
                                                           double to, const PieceFilter& keep = {}) {
  std::vector<std::pair<double, double>> cut;
  for (const auto& p : pieces) {
    if (keep && !keep(p)) continue;
    const double s = std::max(from, p.start), e = std::min(to, p.end);
    if (e > s) cut.emplace_back(s, e);
  }
  std::sort(cut.begin(), cut.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& [s, e] : cut) {
    if (!merged.empty() && s <= merged.back().second) merged.back().second = std::max(merged.back().second, e);
    else merged.emplace_back(s, e);
  }
  return merged;
}

// Seconds of [from, to] covered by at least one kept piece.
inline double UnionSeconds(const std::vector<TimelinePiece>& pieces, double from, double to,
                           const PieceFilter& keep = {}) {
  double total = 0;
  for (const auto& [s, e] : MergedPieces(pieces, from, to, keep)) total += e - s;
  return total;
}

// The stretches of [from, to] no kept piece covers, in time order.
inline std::vector<std::pair<double, double>> UncoveredStretches(const std::vector<TimelinePiece>& pieces, double from,
                                                                 double to, const PieceFilter& keep = {}) {
  std::vector<std::pair<double, double>> gaps;
  double at = from;
  for (const auto& [s, e] : MergedPieces(pieces, from, to, keep)) {
    if (s > at) gaps.emplace_back(at, s);
    at = std::max(at, e);
  }
  if (to > at) gaps.emplace_back(at, to);
  return gaps;
}

// The union of the timeline file's pieces inside [from_ms, to_ms] (ms since
// the epoch), in seconds; without the tools' start-ups when with_startups
// is false.
inline double TimelineUnionSeconds(const std::string& timeline_file, int64_t from_ms, int64_t to_ms,
                                   bool with_startups = true) {
  const auto pieces = ReadTimeline(timeline_file);
  return UnionSeconds(pieces, static_cast<double>(from_ms) / 1000.0, static_cast<double>(to_ms) / 1000.0,
                      with_startups ? PieceFilter{} : PieceFilter([](const TimelinePiece& p) {
                        return !IsToolStartUp(p.what);
                      }));
}

}  // namespace npuprof::bench
