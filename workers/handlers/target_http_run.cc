#include "workers/handlers/target_http_run.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "workers/remote.h"

namespace npuprof::workers {

namespace {

// One run of the program as plan says; *ran tells whether a command ran.
Result<std::optional<profiling::TargetHttpDigest>> RunOnce(const RemoteArgvRunner& run_argv,
                                                           const profiling::TargetHttpPlan& plan, bool* ran,
                                                           int* exit_status) {
  *ran = false;
  const auto argv = profiling::TargetHttpArgv(plan);
  if (!argv) return std::optional<profiling::TargetHttpDigest>();
  auto run = run_argv(*argv, profiling::TargetHttpDeadline(plan));
  if (!run.ok()) return run.status();
  *ran = true;
  *exit_status = run->exit_status;
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

}  // namespace

Result<std::optional<profiling::TargetHttpDigest>> RunTargetHttpWith(const RemoteArgvRunner& run,
                                                                     profiling::TargetInterpreters& cache,
                                                                     const std::string& key,
                                                                     profiling::TargetHttpPlan plan) {
  const std::optional<std::string> cached = cache.Get(key);
  plan.interpreter = cached.value_or(std::string(profiling::kDefaultInterpreter));
  plan.report_interpreter = !cached.has_value();
  bool ran = false;
  int exit_status = 0;
  auto got = RunOnce(run, plan, &ran, &exit_status);
  if (cached && ran && got.ok() && !got->has_value()) {
    // The path no longer starts the program (removed, replaced: 127, 126):
    // nothing was sent, so the same exchange may run again as python3.
    spdlog::info("the interpreter {} resolved for {} did not start the HTTP program (exit {}); asking python3 again",
                 *cached, key, exit_status);
    cache.Forget(key, *cached);
    plan.interpreter = std::string(profiling::kDefaultInterpreter);
    plan.report_interpreter = true;
    got = RunOnce(run, plan, &ran, &exit_status);
  }
  if (got.ok() && got->has_value() && (*got)->interpreter) cache.Put(key, *(*got)->interpreter);
  return got;
}

Result<std::optional<profiling::TargetHttpDigest>> RunTargetHttp(ssh::SshSession& session,
                                                                  const profiling::TargetHttpPlan& plan) {
  const RemoteArgvRunner run = [&session](const std::vector<std::string>& argv, std::chrono::milliseconds deadline) {
    return RunRemote(session, argv, deadline);
  };
  return RunTargetHttpWith(run, profiling::WorkerInterpreters(),
                           profiling::InterpreterKey(session.target().Endpoint(), session.target().env_script), plan);
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
