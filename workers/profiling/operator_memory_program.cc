#include "workers/profiling/operator_memory_program.h"

#include <algorithm>

#include "workers/profiling/operator_memory_digest_source.h"
#include "workers/profiling/remote_analyse.h"

namespace npuprof::profiling {

std::string_view OperatorMemoryDigestSource() { return kOperatorMemoryDigestSource; }

std::string AnalyseMarkerName(const std::string& task_id) {
  const std::string m = AnalyseMarker("", task_id);  // "/.npuprof_analyse.<id>"
  return m.substr(m.rfind('/') + 1);
}

std::vector<std::string> OperatorMemoryDigestArgv(const std::string& root, const std::string& marker_name,
                                                  std::chrono::milliseconds budget, bool final, int top_n,
                                                  bool launch, int64_t limit, int64_t max_bytes) {
  return {"python3",
          "-c",
          std::string(kOperatorMemoryDigestSource),
          "digest",
          root,
          marker_name,
          std::to_string(std::max<int64_t>(budget.count(), 0)),
          final ? "1" : "0",
          std::to_string(std::clamp(top_n, 1, 100)),
          std::to_string(std::max<int64_t>(max_bytes, 0)),
          std::to_string(std::clamp<int64_t>(limit, 0, 256)),
          launch ? DetachedAnalyseScript() : std::string()};
}

}  // namespace npuprof::profiling
