#include "workers/handlers/flush_wait.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/time_util.h"
#include "workers/handlers/service_common.h"
#include "workers/poll_backoff.h"

namespace npuprof::workers {

TaskOutcome WaitForFlush(TaskContext& ctx, const ssh::SshTarget& target, int64_t timeout_s, int64_t deadline_ms,
                         const std::string& what, const FlushPollFn& poll) {
  const int64_t start = NowMs();
  const int64_t deadline = std::min(start + std::clamp<int64_t>(timeout_s, 0, 86400) * 1000, deadline_ms);
  PollBackoff backoff(std::chrono::milliseconds(1000));
  int polls = 0;
  json detail = json::object();
  for (;;) {
    auto signal = poll(detail);
    ++polls;
    if (!signal.ok()) return service::RemoteFailure(signal.status(), target);
    const int64_t now = NowMs();
    const bool timed_out = !signal->has_value() && now >= deadline;
    if (signal->has_value() || timed_out) {
      json r = detail.is_object() ? detail : json::object();
      r["signal"] = timed_out ? std::string("timeout") : **signal;
      r["flush_timed_out"] = timed_out;
      r["waited_ms"] = now - start;
      r["polls"] = polls;
      return TaskOutcome::Success(std::move(r));
    }
    ctx.progress(fmt::format("waiting for {} ({} s left, poll {})", what, (deadline - now) / 1000, polls));
    const auto left = std::chrono::milliseconds(deadline - now);
    if (!service::SleepUnlessCancelled(ctx, std::min(backoff.Next(), left)))
      return TaskOutcome::Failure("cancelled", what + ": wait cancelled", false);
  }
}

}  // namespace npuprof::workers
