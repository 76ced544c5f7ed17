// memory.wait_flush: after the service stop, waits until msprof has exited
// (no process of the service's group is left) and its PROF_* dirs are
// complete (end_info markers, or its completion lines), in one remote
// command per poll (flush_signals.h), or until the deadline (flush_wait.h).
#include <fmt/format.h>

#include "workers/handlers/flush_signals.h"
#include "workers/handlers/flush_wait.h"
#include "workers/handlers/service_common.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

TaskOutcome MemWaitFlush(const tasks::MemoryWaitFlush& p, const proto::Task&, TaskContext& ctx) {
  service::Call c = service::Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  auto dir = service::ResolveRemotePath(*c.session, p.msprof_dir());
  if (!dir.ok()) return service::RemoteFailure(dir.status(), c.target);
  auto rt = service::ResolveRemotePath(*c.session, p.runtime_dir());
  if (!rt.ok()) return service::RemoteFailure(rt.status(), c.target);
  const std::string log_in = !p.stdout_log().empty() ? p.stdout_log() : *rt + "/stdout.log";
  auto log = service::ResolveRemotePath(*c.session, log_in);
  if (!log.ok()) return service::RemoteFailure(log.status(), c.target);
  if (dir->empty() || (*dir)[0] != '/' || (*log)[0] != '/')
    return TaskOutcome::Failure("bad_payload", "msprof_dir and stdout_log must be absolute paths", false);
  int64_t pgid = p.pid();
  if (pgid > 0 && !service::ServiceMarker(*rt).ok()) pgid = 0;  // no marked group to look at: markers only
  auto argv = MsprofFlushPollArgv(*dir, *log, pgid, *rt);
  if (!argv.ok()) return TaskOutcome::Failure("bad_payload", argv.status().message(), false);
  return WaitForFlush(ctx, c.target, p.timeout_s(), p.deadline_ms(), "msprof to finish its flush", [&](json& detail) -> Result<std::optional<std::string>> {
    auto r = RunRemote(*c.session, *argv, std::chrono::seconds(30));
    if (!r.ok()) return r.status();
    if (r->exit_status != 0)
      return Status::Io(fmt::format("checking {} failed (it {}): {}", *dir, ExitText(*r), TailLines(r->stderr_data, 3)));
    MsprofFlushPoll poll = ParseMsprofFlushPoll(r->stdout_data, pgid > 0);
    detail = MsprofFlushJson(poll);
    detail["msprof_dir"] = *dir;
    return MsprofFlushSignal(poll);
  });
}

}  // namespace npuprof::workers
