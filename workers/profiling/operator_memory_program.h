// The operator-memory digest program (workers/profiling/remote/
// operator_memory_digest.py, embedded at build time) as one remote command:
// it starts or attaches to analyse() in every *_ascend_pt directory under a
// profile root (the marker protocol of remote_analyse.h, its launch script
// passed as an argument), waits up to a budget on the target for their exit
// codes, and prints either {"v":1,"pending":[...]} or every rank's digest of
// memory_record.csv and operator_memory.csv (statemachine/
// operator_memory_digest.h decodes it). Only the digest crosses the link.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace npuprof::profiling {

// A CSV above this is not read on the target (the digest says "too_large").
// The program streams a file line by line in constant memory, so the cap
// bounds only the target's time: 16 GiB is a long capture's
// operator_memory.csv, read in minutes (the task's read timeout).
inline constexpr int64_t kOperatorCsvMaxBytes = int64_t{16} << 30;
// How long one call waits on the target for analyse() before answering "pending".
inline constexpr std::chrono::milliseconds kOperatorMemoryWaitSlice{10000};

// `python3 -c SOURCE digest ROOT MARKER_NAME BUDGET_MS FINAL TOP_N MAX_BYTES LIMIT LAUNCH`:
// LAUNCH is DetachedAnalyseScript() when `launch`, else "" (no analyse()
// started). LIMIT is how many analyse() may run at once, 0 for the program
// to choose it from the target's means (the first call; later calls pass
// what it chose). MARKER_NAME is the marker's file name inside each rank
// directory (AnalyseMarkerName).
std::vector<std::string> OperatorMemoryDigestArgv(const std::string& root, const std::string& marker_name,
                                                  std::chrono::milliseconds budget, bool final, int top_n,
                                                  bool launch, int64_t limit = 0,
                                                  int64_t max_bytes = kOperatorCsvMaxBytes);

// The marker's name for a task id: the last part of AnalyseMarker(dir, id).
std::string AnalyseMarkerName(const std::string& task_id);

// The embedded program's source (the .py file's bytes).
std::string_view OperatorMemoryDigestSource();

}  // namespace npuprof::profiling
