#include "workers/handlers/ready_then_snapshot.h"

#include <algorithm>
#include <future>

#include <spdlog/spdlog.h>

#include "common/time_util.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"
#include "workers/ssh/ssh_pool.h"

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
  ctx.progress("ready; taking the after-ready snapshot and reading the logs");  // renews the lease
  // The log read beside the snapshot, as their two tasks ran before (its
  // own connection from the pool while the snapshot holds one); the
  // snapshot is the level right after readiness.
  std::future<TaskOutcome> logs;
  if (p.has_then_logs() && !ctx.cancelled.load()) {
    tasks::MemoryLogs then = p.then_logs();
    if (!then.has_machine()) *then.mutable_machine() = p.machine();
    // A session lent to the read alone (SshPool::Acquire: the wait's own,
    // given back, is idle now), so it does not queue behind the snapshot on
    // the shared one.
    TaskOutcome fail;
    if (auto c = mem::Open(then.machine(), ctx, &fail)) {
      c->session = ctx.pool.Acquire(c->target);
      logs = std::async(std::launch::async,
                        [then = std::move(then), c = std::move(*c)]() mutable { return MemLogsOn(then, c); });
    }
  }
  if (p.has_then_snapshot() && !ctx.cancelled.load()) {
    tasks::MemoryNpuSmi then = p.then_snapshot();
    if (!then.has_machine()) *then.mutable_machine() = p.machine();
    AddPart(ready, "after_ready", MemNpuSmi(then, task, ctx));
  }
  if (logs.valid()) AddPart(ready, "vllm_log", logs.get());
  ready.result["then_ms"] = std::max<int64_t>(0, NowMs() - t0);
  return ready;
}

}  // namespace npuprof::workers::service
