#include "workers/handlers/kernel_summary_stream.h"

#include <algorithm>

#include "parsers/kernel_summary.h"

namespace npuprof::workers {

nlohmann::json StreamKernelSummary(ssh::SshSession& session, const std::string& path,
                                   const std::function<void()>& progress, const std::atomic<bool>& cancelled,
                                   uint64_t max_bytes, uint64_t chunk_bytes) {
  KernelSummaryBuilder builder;
  uint64_t offset = 0;
  bool truncated = false;
  auto fail = [&](const std::string& why) { return nlohmann::json{{"path", path}, {"error", why}}; };
  while (true) {
    if (cancelled.load()) return fail("cancelled while reading");
    const uint64_t want = std::min(std::max<uint64_t>(chunk_bytes, 1), max_bytes - offset);
    auto chunk = session.ReadFile(path, offset, want);
    if (!chunk.ok()) return fail(chunk.status().message());
    offset += chunk->size();
    const bool at_end = chunk->size() < want;
    if (!at_end && offset >= max_bytes) {
      // Probe one byte: is there more than the cap?
      auto more = session.ReadFile(path, offset, 1);
      truncated = more.ok() && !more->empty();
      if (truncated) {
        const size_t nl = chunk->rfind('\n');
        chunk->resize(nl == std::string::npos ? 0 : nl + 1);
      }
    }
    if (Status st = builder.Feed(*chunk); !st.ok()) return fail(st.message());
    if (progress) progress();
    if (at_end || offset >= max_bytes) break;
  }
  auto sum = builder.Finish();
  if (!sum.ok()) return fail(sum.status().message());
  nlohmann::json j = KernelSummaryJson(*sum);
  j["path"] = path;
  j["bytes_read"] = offset;
  j["truncated"] = truncated;
  return j;
}

}  // namespace npuprof::workers
