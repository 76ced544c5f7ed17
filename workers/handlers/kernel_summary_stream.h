// The kernel summary of one rank's kernel_details.csv, read from the target
// in chunks over the rank's SSH connection and aggregated here
// (parsers/kernel_summary.h): the file is never held whole in memory.
//
// Reads at most kMaxKernelSummaryBytes (the stat size is not trusted: it
// reads until a short chunk); past the cap the summary covers the bytes up
// to the last complete line and says "truncated": true. Every chunk
// extends the task's lease through `progress`; a cancelled task stops
// between chunks.
//
// Result: KernelSummaryJson plus {"path", "bytes_read", "truncated"}, or
// {"path", "error"} when the file cannot be read or parsed (the rank's
// gates are judged elsewhere; a summary never fails the analyse task).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "workers/ssh/ssh_session.h"

namespace npuprof::workers {

inline constexpr uint64_t kMaxKernelSummaryBytes = uint64_t{512} << 20;
inline constexpr uint64_t kKernelSummaryChunkBytes = uint64_t{8} << 20;

nlohmann::json StreamKernelSummary(ssh::SshSession& session, const std::string& path,
                                   const std::function<void()>& progress, const std::atomic<bool>& cancelled,
                                   uint64_t max_bytes = kMaxKernelSummaryBytes,
                                   uint64_t chunk_bytes = kKernelSummaryChunkBytes);

}  // namespace npuprof::workers
