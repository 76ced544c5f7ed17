#include "workers/handlers/ready_then_snapshot.h"

#include <spdlog/spdlog.h>

#include "common/time_util.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers::service {

namespace {

// One part: its handler's outcome added to `ready` under `key`, or left out.
void AddPart(TaskOutcome& ready, const char* key, TaskOutcome part) {
  if (!part.ok) {
    spdlog::info("the readiness wait's {}: {}: {}; left to its own task", key, part.error_kind, part.error);
    return;
  }
  ready.result[key] = std::move(part.result);
  for (auto& b : part.blobs) ready.blobs.push_back(std::move(b));
}

}  // namespace

TaskOutcome TakeAfterReady(const tasks::ServiceWaitReady& p, const proto::Task& task, TaskContext& ctx,
                           TaskOutcome ready) {
  if (!ready.ok || (!p.has_then_snapshot() && !p.has_then_logs())) return ready;
  const int64_t t0 = NowMs();
  // The snapshot first: it is the level right after readiness.
  if (p.has_then_snapshot() && !ctx.cancelled.load()) {
    tasks::MemoryNpuSmi then = p.then_snapshot();
    if (!then.has_machine()) *then.mutable_machine() = p.machine();
    ctx.progress("ready; taking the after-ready snapshot");  // each part renews the lease
    AddPart(ready, "after_ready", MemNpuSmi(then, task, ctx));
  }
  if (p.has_then_logs() && !ctx.cancelled.load()) {
    tasks::MemoryLogs then = p.then_logs();
    if (!then.has_machine()) *then.mutable_machine() = p.machine();
    ctx.progress("ready; reading the service's logs");
    AddPart(ready, "vllm_log", MemLogs(then, task, ctx));
  }
  ready.result["then_ms"] = std::max<int64_t>(0, NowMs() - t0);
  return ready;
}

}  // namespace npuprof::workers::service
