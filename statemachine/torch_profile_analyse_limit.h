// How many analyse() processes may run at once on one machine
// (docs/BEHAVIOUR.md#tp-analyse, "How many at once"), and the reading of the
// one remote command that tells what the machine has. Pure: no I/O.
//
// Ascend's profiler guide asks for 20x a capture's raw data size in free
// memory for its analysis, so the rule is
//
//   limit = max(1, min(cores, MemAvailable / (20 x largest rank's raw bytes), ranks))
//
// (a rank of 0 bytes bounds nothing by memory). When the cores, the memory
// or any rank's size could not be read, the limit is 1 (the safe default:
// one rank at a time cannot exhaust a host more than the capture itself
// would). --analyse-parallel N replaces the rule. Free disk under the root
// does not change the limit (analyse() writes its outputs whatever the
// order), but under 20x the total raw size it is named in `warning`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace npuprof::sm {

// The guide's factor: memory (and disk) per byte of raw data.
inline constexpr int64_t kAnalyseRawFactor = 20;

struct AnalyseMeans {
  std::optional<int64_t> cores;
  std::optional<int64_t> mem_available_bytes;
  std::optional<int64_t> disk_free_bytes;
  std::vector<std::optional<int64_t>> rank_bytes;  // one per listed rank dir
};

struct AnalyseLimit {
  int64_t limit = 1;
  std::string reason;
  std::string source;  // "override" | "means" | "default"
  std::optional<int64_t> largest_rank_bytes;
  std::optional<int64_t> total_rank_bytes;
  std::string warning;  // free disk under 20x the total raw data
};

// `ranks` is the number of listed dirs (rank_bytes may be shorter when the
// means were not read: each missing entry is an unread size).
AnalyseLimit ChooseAnalyseLimit(const AnalyseMeans& means, size_t ranks, std::optional<int64_t> override_limit);

// "1.2 GiB", "512.0 MiB", "12 KiB", "0 B".
std::string BytesText(int64_t bytes);

// Reads the output of the means command (TorchProfileListDirs,
// workers/handlers/torch_profile_list_handler.cc): one line per value,
// "cores N", "mem_available_kb N", "disk_free_kb N", then "dir_kb N" per
// listed dir in order (N empty when unread). A value missing, empty, not a number or out
// of range is left unread; dir sizes are kept in order (`dirs` of them, the
// missing ones unread). Never fails.
AnalyseMeans ParseAnalyseMeans(const std::string& text, size_t dirs);

}  // namespace npuprof::sm
