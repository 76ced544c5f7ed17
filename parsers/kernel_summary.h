// The per-rank kernel summary of a torch_npu kernel_details.csv: which
// kernels took the device time of a profiling window. Built incrementally,
// so a file of any size costs memory only per distinct kernel. Pure: no I/O.
//
// The REFERENCE, not the production path: npuprof computes the summary on
// the target, next to the data, with the rank digest program
// (workers/profiling/remote/rank_digest.py, workers/profiling/rank_digest.h),
// the one definition of these rules. This builder states them in C++ for
// the differential test (tests/workers/kernel_summary_differential_test.cc),
// which holds the program's JSON equal to KernelSummaryJson's on every test
// file, the fuzz seeds and hostile cases; a change of a rule is made in both
// and that test proves them equal.
//
// Columns are matched by name (Name, Type, Duration(us); "Accelerator Core"
// when present), never by position; quoting, BOM, CRLF and trimming follow
// parsers/csv_records.h. Per data row: a Duration(us) cell that is no number
// ("N/A", "") or is negative skips the row (counted in skipped_rows); one
// that spells a number out of range ("inf", "1e999") refuses the file
// (kCorruption naming the data row). Kernels are grouped by (Name, Type);
// communication kernels carry a call-site suffix in their names, so the
// by-Type table is the one to compare for HCCL.
//
// Bounds: names and types are cut to kMaxKernelNameBytes; after
// max_distinct distinct (Name, Type) pairs, further new pairs are added to
// one "(other kernels)" entry (other_rows says how many rows went there),
// so totals stay exact. Names from the target are bytes: the JSON form
// carries them as valid UTF-8 (invalid bytes replaced).
//
// Output order: top by total_us descending, ties by name then type; at most
// top_n entries in `top` and max_types in `by_type`.
//
// When the file has a "Start Time(us)" column (µs since the epoch on the
// clock of the host that wrote the rank), the summary also keeps the
// rank's kernel window: the earliest start and the latest start + duration
// of the counted rows whose start is a number (other starts are ignored).
// A multi-node trace puts these windows on one clock (views/chrome_trace.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "parsers/csv_records.h"

namespace npuprof {

inline constexpr size_t kMaxKernelNameBytes = 256;
inline constexpr const char* kOtherKernelsName = "(other kernels)";

struct KernelStat {
  std::string name;    // "" in by_type entries
  std::string type;
  std::string core;    // Accelerator Core of the first row ("" when no column; "mixed" when rows differ)
  uint64_t count = 0;
  double total_us = 0;
  double max_us = 0;
  double mean_us() const { return count ? total_us / static_cast<double>(count) : 0; }
};

struct KernelSummary {
  uint64_t data_rows = 0;      // every data record read
  uint64_t counted_rows = 0;   // rows whose duration was added
  uint64_t skipped_rows = 0;   // no number / negative duration / too few cells
  uint64_t other_rows = 0;     // rows folded into "(other kernels)"
  uint64_t distinct_kernels = 0;
  double total_us = 0;         // sum of every counted row
  std::vector<KernelStat> top;
  std::vector<KernelStat> by_type;
  std::optional<double> first_start_us;  // earliest Start Time(us) of a counted row
  std::optional<double> last_end_us;     // latest Start Time(us) + Duration(us)
};

class KernelSummaryBuilder {
 public:
  explicit KernelSummaryBuilder(size_t max_distinct = 20000);
  KernelSummaryBuilder(const KernelSummaryBuilder&) = delete;
  KernelSummaryBuilder& operator=(const KernelSummaryBuilder&) = delete;

  // Feeds the next bytes of the file. Once an error is returned (a header
  // without the needed columns, an out-of-range duration), later calls
  // return it again and nothing more is read.
  Status Feed(std::string_view chunk);
  // Ends the file and returns the summary (or the first error).
  Result<KernelSummary> Finish(size_t top_n = 30, size_t max_types = 64);

 private:
  bool OnRecord(const std::vector<std::string>& cells, size_t index);

  struct Agg {
    std::string core;
    uint64_t count = 0;
    double total_us = 0;
    double max_us = 0;
  };
  size_t max_distinct_;
  CsvRecordReader reader_;
  Status error_;
  size_t name_col_ = 0, type_col_ = 0, dur_col_ = 0;
  std::optional<size_t> core_col_;
  std::optional<size_t> start_col_;
  std::map<std::pair<std::string, std::string>, Agg> kernels_;
  std::map<std::string, Agg> types_;
  KernelSummary sum_;
};

// {"data_rows", "counted_rows", "skipped_rows", "other_rows",
//  "distinct_kernels", "total_us", "top": [{"name", "type", "core", "count",
//  "total_us", "mean_us", "max_us", "share_pct"}], "by_type": [{"type",
//  "count", "total_us", "mean_us", "max_us", "share_pct"}], "first_start_us",
//  "last_end_us" (only when the file had start times)}; µs rounded to 0.001
//  (the window's bounds are kept as read: they are epoch µs).
nlohmann::json KernelSummaryJson(const KernelSummary& s);

}  // namespace npuprof
