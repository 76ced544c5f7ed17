// torch_profile.wait_flush: after /stop_profile, waits until torch_npu has
// finalised every rank's *_ascend_pt (profiler_info*.json present, sizes
// steady between two polls), in one remote command per poll
// (flush_signals.h), or until the deadline (flush_wait.h).
#include <algorithm>

#include <fmt/format.h>

#include "workers/handlers/flush_signals.h"
#include "workers/handlers/flush_wait.h"
#include "workers/handlers/service_common.h"
#include "workers/handlers/torch_profile_handlers.h"

namespace npuprof::workers {

TaskOutcome TorchProfileWaitFlush(const tasks::TorchProfileWaitFlush& p, const proto::Task&, TaskContext& ctx) {
  service::Call c = service::Open(p.machine(), ctx);
  if (c.failure) return *c.failure;
  // The analyses after the stop each hold a connection of their own: opened
  // now, beside the wait (statemachine/torch_profile_analysis.h).
  if (p.warm_sessions() > 0) ctx.pool.WarmUpTo(c.target, static_cast<size_t>(std::min<int64_t>(p.warm_sessions(), 64)));
  auto root = service::ResolveRemotePath(*c.session, p.profile_root());
  if (!root.ok()) return service::RemoteFailure(root.status(), c.target);
  if (root->empty() || (*root)[0] != '/')
    return TaskOutcome::Failure("bad_payload", "profile_root must be an absolute path", false);
  const int64_t expected = p.expected_ranks();
  const auto argv = TorchFlushPollArgv(*root);
  TorchFlushPoll prev;
  bool have_prev = false;
  TaskOutcome out = WaitForFlush(ctx, c.target, p.timeout_s(), p.deadline_ms(), "torch_npu to finalise every rank", [&](json& detail) -> Result<std::optional<std::string>> {
    auto r = RunRemote(*c.session, argv, std::chrono::seconds(30));
    if (!r.ok()) return r.status();
    if (r->exit_status != 0)
      return Status::Io(fmt::format("listing {} failed (it {}): {}", *root, ExitText(*r), TailLines(r->stderr_data, 3)));
    TorchFlushPoll cur = ParseTorchFlushPoll(r->stdout_data);
    auto signal = TorchFlushSignal(prev, cur, have_prev);
    int finalised = 0;
    for (const auto& d : cur.dirs) finalised += d.profiler_info > 0 ? 1 : 0;
    detail = json{{"profile_root", *root}, {"root_exists", cur.root_exists}, {"expected_ranks", expected},
                  {"dirs_seen", cur.dirs.size()}, {"ranks_finalised", finalised}, {"dirs", TorchFlushDirsJson(cur)}};
    prev = std::move(cur);
    have_prev = true;
    return signal;
  });
  return out;
}

}  // namespace npuprof::workers
