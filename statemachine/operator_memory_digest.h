// The operator-memory digest of one torch_npu rank (memory-profile
// --operator-memory), as a message decoded once with a Status. Pure.
//
// The digest is what the remote program
// workers/profiling/remote/operator_memory_digest.py prints about a rank's
// ASCEND_PROFILER_OUTPUT/{memory_record.csv, operator_memory.csv}; the
// worker decodes it (ParseOperatorMemoryOutput) and answers the ranks
// re-encoded (OperatorMemoryRankJson); the report decodes the recorded
// ranks again (DecodeOperatorMemoryRanks) and projects them
// (operator_memory_report.h). Shape: docs/FORMATS.md#operator-memory-digest.
//
// Decoding checks every field: its type, a number finite and in range, a
// count whole and >= 0, a string valid UTF-8 within its cap, a file status
// one of kOperatorFileStatuses, at most kMaxOperatorRanks ranks and
// kMaxPeakOperators operators each. A bad field is an error naming it
// (ranks[2].operators[0].size_kb: ...); nothing is defaulted from a bad value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::sm {

inline constexpr size_t kMaxOperatorRanks = 256;
inline constexpr size_t kMaxPeakOperators = 100;
inline constexpr size_t kMaxOperatorDigestBytes = size_t{1} << 20;
// A file status (the digest program's): only "ok" means the file was read whole.
inline constexpr std::string_view kOperatorFileStatuses[] = {"ok",       "missing",   "empty",      "truncated",
                                                             "not_utf8", "too_large", "bad_header", "unreadable"};

struct OperatorMemoryFile {
  std::string status;   // one of kOperatorFileStatuses
  std::string problem;  // why, when not ok
  int64_t bytes = 0;
  int64_t rows = 0;      // data rows read
  int64_t bad_rows = 0;  // rows whose cells could not be read (passed over)
};

struct OperatorMemoryPeak {
  double timestamp_us = 0;
  double allocated_mb = 0;  // PTA Total Allocated(MB) at the peak row
  double reserved_mb = 0;   // PTA Total Reserved(MB) at the peak row
  int64_t row = 0;          // 1-based data row of memory_record.csv
};

struct OperatorMemoryWindow {
  double first_us = 0, last_us = 0;
  double max_reserved_mb = 0;
  int64_t pta_rows = 0;
};

struct PeakOperator {
  std::string name;
  double size_kb = 0;
  double allocated_us = 0;
  std::optional<double> released_us;  // nullopt: not released within the window
  int64_t row = 0;                    // 1-based data row of operator_memory.csv
};

struct OperatorMemoryRank {
  std::string dir;  // the rank's *_ascend_pt directory on the target
  std::optional<int64_t> device_id;
  std::optional<int64_t> analyse_exit;  // analyse()'s exit code (nullopt: none was written)
  std::string analyse_problem;
  OperatorMemoryFile memory_record, operator_memory;
  std::optional<OperatorMemoryPeak> peak;
  std::optional<OperatorMemoryWindow> window;
  std::vector<PeakOperator> operators;  // largest first
};

// How many analyse() the program ran at once, and why (torch-profile's
// rule applied on the target: statemachine/torch_profile_analyse_limit.h).
struct OperatorAnalyseLimit {
  int64_t limit = 1;   // 1..kMaxOperatorRanks
  std::string source;  // "means" | "default" | "given"
  std::string reason;
};

// What the program printed: either still waiting for analyse() (pending
// names the directories running or waiting for their turn), or every
// rank's digest; with the analyse limit it applied (absent from older
// programs' output).
struct OperatorMemoryOutput {
  std::vector<std::string> pending;
  std::vector<OperatorMemoryRank> ranks;
  std::optional<OperatorAnalyseLimit> analyse_limit;
};

// The program's stdout: one JSON object {"v":1, "pending":[...]} or
// {"v":1, "ranks":[...]}, each with an optional "analyse_limit":
// {"limit", "source", "reason"}, at most kMaxOperatorDigestBytes.
Result<OperatorMemoryOutput> ParseOperatorMemoryOutput(std::string_view out);

// A recorded list of ranks (as OperatorMemoryRankJson wrote them).
Result<std::vector<OperatorMemoryRank>> DecodeOperatorMemoryRanks(const nlohmann::json& ranks);

nlohmann::json OperatorMemoryRankJson(const OperatorMemoryRank& r);

}  // namespace npuprof::sm
