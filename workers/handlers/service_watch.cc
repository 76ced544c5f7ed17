// service.watch: polls a ready service's process group leader every poll_s
// seconds and answers only when it is gone — or alive without the service's
// marker, its pid reused — (failure `service_died`, with the stderr tail and
// logs as evidence) or when the broker cancels the attempt (the run is
// stopping). With `once` it is a liveness check: it answers at its first
// poll, a success ({polls: 1, members_left}) when the service is alive. Read-only, so re-dispatch after a lost worker or a
// server restart simply watches again. Each poll reports progress, which
// keeps the task's lease alive.
#include <algorithm>

#include <fmt/format.h>

#include "workers/handlers/service_common.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers::service {

TaskOutcome Watch(const tasks::ServiceWatch& p, const proto::Task&, TaskContext& ctx) {
  Call c = Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  auto resolved = ResolveRemotePath(*c.session, p.runtime_dir());
  if (!resolved.ok()) return RemoteFailure(resolved.status(), c.target);
  const std::string rt = *resolved;
  const int64_t pid = p.pid();
  const int64_t poll_ms = std::clamp<int64_t>(p.poll_s(), 1, 3600) * 1000;
  if (pid <= 0) return TaskOutcome::Failure("bad_payload", "service.watch needs the service pid", false);
  int polls = 0;
  while (true) {
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "watch cancelled", false);
    auto st = QueryGroup(*c.session, pid, rt);
    if (!st.ok()) return RemoteFailure(st.status(), c.target);
    ++polls;
    if (!st->leader_alive) {
      TaskOutcome out;
      json d = Diagnostics(*c.session, rt, out);
      d["polls"] = polls;
      d["members_left"] = st->members;
      if (st->leader_foreign) d["pid_not_ours"] = true;
      out.result = d;
      out.retryable = false;
      out.error_kind = "service_died";
      out.error = fmt::format("vLLM (pid {}) exited while ready ({} group member(s) left); stderr tail ({}/stderr.log):\n{}",
                              pid, st->members, rt, TailLines(d.value("stderr_tail", ""), 5));
      return out;
    }
    if (p.once()) return TaskOutcome::Success(json{{"polls", polls}, {"members_left", st->members}});
    ctx.progress(fmt::format("service pid {} alive ({} member(s))", pid, st->members));
    if (!SleepUnlessCancelled(ctx, std::chrono::milliseconds(poll_ms)))
      return TaskOutcome::Failure("cancelled", "watch cancelled", false);
  }
}

}  // namespace npuprof::workers::service
