#include "workers/result_cap.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/socket_security.h"
#include "common/utf8.h"

namespace npuprof::workers {

void FitResultToMessageCap(proto::TaskResult* r) {
  const int64_t size = static_cast<int64_t>(r->ByteSizeLong());
  if (size + kResultFramingBytes <= MaxMessageBytes()) return;
  std::vector<std::pair<size_t, std::string>> blobs;
  for (const auto& b : r->blobs()) blobs.emplace_back(b.data().size(), ToValidUtf8(b.name()));
  std::sort(blobs.begin(), blobs.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string largest;
  for (size_t i = 0; i < blobs.size() && i < 3; ++i)
    largest += fmt::format("{}{} ({} bytes)", i ? ", " : "", blobs[i].second, blobs[i].first);
  const std::string error = fmt::format(
      "the task's result is {} bytes, over the {} message cap of npuprof's sockets; largest evidence: {}", size,
      MessageCapText(), largest.empty() ? "none (the result itself)" : largest);
  proto::TaskResult failed;
  failed.set_task_id(r->task_id());
  failed.set_run_id(r->run_id());
  failed.set_attempt(r->attempt());
  failed.set_ok(false);
  failed.set_retryable(false);
  failed.set_error_kind("result_too_large");
  failed.set_error(error);
  *r = std::move(failed);
}

}  // namespace npuprof::workers
