#include "workers/handlers/target_http_run.h"

#include <fmt/format.h>

#include "workers/remote.h"

namespace npuprof::workers {

Result<std::optional<profiling::TargetHttpDigest>> RunTargetHttp(ssh::SshSession& session,
                                                                  const profiling::TargetHttpPlan& plan) {
  const auto argv = profiling::TargetHttpArgv(plan);
  if (!argv) return std::optional<profiling::TargetHttpDigest>();
  auto run = RunRemote(session, *argv, profiling::TargetHttpDeadline(plan));
  if (!run.ok()) return run.status();
  if (run->stdout_omitted > 0)
    return Status::Corruption(fmt::format(
        "the HTTP program on the target wrote more than {} bytes (its digest was cut); its requests may have "
        "been sent",
        ssh::kExecOutputCap));
  auto digest = profiling::ParseTargetHttpOutput(run->stdout_data, run->exit_status, run->stderr_data, plan);
  if (!digest.ok() && run->timed_out)
    return Status::Timeout(fmt::format("timeout: the HTTP program on the target ran past its {} s and was stopped; "
                                       "its requests may have been sent",
                                       profiling::TargetHttpDeadline(plan).count() / 1000));
  return digest;
}

Result<ssh::HttpResponse> AsHttpResponse(const profiling::TargetHttpAnswer& a, int port) {
  if (!a.answered) {
    const bool timed_out = a.error.rfind("timeout", 0) == 0 || a.error.rfind("TimeoutError", 0) == 0 ||
                           a.error.find("timed out") != std::string::npos;
    const std::string text = fmt::format("127.0.0.1:{} on the target after {} ms: {}", port, a.latency_ms, a.error);
    if (timed_out) return Status::Timeout("timeout: " + text);
    return Status::Unavailable("channel_failed: " + text);
  }
  ssh::HttpResponse r;
  r.status = a.status;
  r.reason = a.reason;
  r.body = a.body;
  r.latency_ms = a.latency_ms;
  return r;
}

}  // namespace npuprof::workers
