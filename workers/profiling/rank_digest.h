// A rank's analysis next to its data: one remote program per
// torch_profile.analyse_rank call (workers/profiling/remote/rank_digest.py,
// embedded at build time), and the decoding of what it prints. Only the
// digest crosses the link: the program starts or attaches to analyse()
// (the marker protocol of remote_analyse.h), waits on the target for its
// exit-code file, and in the same round trip reports the exit code, the
// log's head and tail, the kernel_details.csv check with its kernel
// summary, the trace_view.json check and the rank's device.
//
// The program is the one definition of the kernel summary's rules;
// parsers/kernel_summary.h is its C++ reference, held equal to it by a
// differential test (tests/workers/kernel_summary_differential_test.cc).
//
// trace_view.json is streamed on the target: valid JSON (NaN and Infinity
// refused, strict UTF-8; a BOM at the start is skipped) whose top level is
// an array of events or an object with a "traceEvents" array. The array is
// read one element at a time, so memory is bounded by the largest element
// (at most 64 Mi characters, else the file is called invalid), never by the
// file.
//
// Decoding (ParseRankDigest) is pure: the output must be one JSON object of
// at most kMaxRankDigestBytes, valid UTF-8, at most 8 levels deep; every
// field is checked (type, range, size) and a bad one is an error naming it.
// Strings from the target come back valid UTF-8 and capped.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::profiling {

// What the program prints at most (its run keeps at most the exec cap,
// ssh::kExecOutputCap; anything above this is refused as the digest).
inline constexpr size_t kMaxRankDigestBytes = size_t{256} << 10;
// How long one call waits on the target for analyse() to end.
inline constexpr std::chrono::milliseconds kRankDigestWaitSlice{10000};

// `python3 -c SOURCE digest DIR MARKER BUDGET_MS FINAL LAUNCH`: LAUNCH is
// the start-or-attach script of remote_analyse.h when `launch`, else "".
// With `final`, the outputs are read even when analyse() still runs.
std::vector<std::string> RankDigestArgv(const std::string& dir, const std::string& marker,
                                        std::chrono::milliseconds budget, bool final, bool launch);

// The embedded program's source (the .py file's bytes).
std::string_view RankDigestSource();

struct OutputDigest {
  bool exists = false;
  uint64_t size = 0;
  std::optional<bool> valid;              // absent: not checked
  std::optional<uint64_t> columns;        // kernel_details.csv
  std::optional<uint64_t> data_rows;      // kernel_details.csv: every data row
  std::optional<uint64_t> event_count;    // trace_view.json
  std::optional<uint64_t> bytes_read;     // read on the target
  std::string problem;                    // when not valid
};

struct RankDigest {
  // The launch (first call only): its exit code and stderr when it failed,
  // else what it printed ("started", "running", "done").
  std::optional<int64_t> launch_exit;
  std::string launch_stderr;
  std::string launch;
  int64_t polls = 0;
  int64_t waited_ms = 0;
  bool finished = false;   // the exit-code file exists
  bool alive = false;      // not finished and the process runs
  std::optional<int64_t> exit_code;
  // Present once the outputs were read (analyse() ended or vanished, or a final call).
  bool has_outputs = false;
  std::optional<std::string> log;  // exact bytes: head, ssh::OmittedMarker, tail
  uint64_t log_size = 0;
  OutputDigest kernel_details, trace_view;
  std::optional<nlohmann::json> kernel_summary;  // KernelSummaryJson's shape, checked
  std::string summary_error;
  std::optional<int64_t> device_id;
  size_t digest_bytes = 0;  // the output's size
};

Result<RankDigest> ParseRankDigest(std::string_view out);

// Checks a KernelSummaryJson-shaped object field by field (counts whole and
// >= 0, µs finite and >= 0, at most 30 top and 64 by_type entries, names
// valid UTF-8 of at most 1 KiB) and returns it rebuilt from the checked
// fields only. `where` prefixes errors.
Result<nlohmann::json> CheckKernelSummaryJson(const nlohmann::json& j, const std::string& where);

}  // namespace npuprof::profiling
