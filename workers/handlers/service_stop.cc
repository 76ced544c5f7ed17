// service.stop: SIGINT to the service's process group, wait grace; SIGTERM,
// wait grace; SIGKILL only with force. A service that is already gone (or was
// never started) is success. The log tails are kept as evidence.
#include <fmt/format.h>

#include "workers/handlers/service_common.h"
#include "workers/poll_backoff.h"
#include "workers/handlers/service_handlers.h"

namespace npuprof::workers::service {

namespace {

// Reads <runtime>/pid; 0 when there is none. Waits up to 10 s when the start
// marker exists but the pid is not yet recorded.
Result<int64_t> PidFromRuntime(Call& c, const std::string& rt, TaskContext& ctx) {
  PollBackoff backoff(std::chrono::milliseconds(250));
  for (int i = 0; i < 40; ++i) {
    auto text = c.session->ReadFile(rt + "/pid");
    if (text.ok() && std::atoll(text->c_str()) > 0) return static_cast<int64_t>(std::atoll(text->c_str()));
    if (!text.ok() && ssh::ErrorKindOf(text.status()) != ssh::SshErrorKind::kRemoteError) return text.status();
    auto marker = c.session->Stat(rt + "/.started");
    if (!marker.ok()) {
      if (ssh::ErrorKindOf(marker.status()) == ssh::SshErrorKind::kRemoteError) return int64_t{0};
      return marker.status();
    }
    if (!SleepUnlessCancelled(ctx, backoff.Next())) return int64_t{0};
  }
  return int64_t{0};
}

// Waits until the group is gone or grace passes; true when gone.
Result<bool> WaitGone(Call& c, int64_t pid, int64_t grace_ms, TaskContext& ctx, const std::string& after) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  PollBackoff backoff(std::chrono::milliseconds(250));
  while (true) {
    auto st = QueryGroup(*c.session, pid);
    if (!st.ok()) return st.status();
    if (!st->any_alive()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    ctx.progress(fmt::format("waiting for pid {} to exit after {} ({} process(es) left)", pid, after, st->members));
    if (!SleepUnlessCancelled(ctx, backoff.Next())) return false;
  }
}

}  // namespace

TaskOutcome Stop(const proto::Task& task, TaskContext& ctx) {
  Call c = Open(task, ctx);
  if (c.failure) return *c.failure;
  const json& p = c.payload;
  const std::string rt = p.value("runtime_dir", "");
  const bool force = p.value("force", false);
  const int64_t grace_ms = p.value("grace_s", int64_t{10}) * 1000;
  int64_t pid = p.contains("pid") && p["pid"].is_number_integer() ? p["pid"].get<int64_t>() : 0;
  if (pid <= 0 && !rt.empty()) {
    auto found = PidFromRuntime(c, rt, ctx);
    if (!found.ok()) return OutcomeFromSsh(found.status(), c.target);
    pid = *found;
  }
  TaskOutcome out;
  json signals = json::array();
  auto finish_ok = [&](bool already_gone) {
    if (!rt.empty()) {
      TaskOutcome logs;
      json d = Diagnostics(*c.session, rt, logs);
      out.blobs = std::move(logs.blobs);
      out.result["stderr_tail"] = d["stderr_tail"];
    }
    out.ok = true;
    out.result.update(json{{"stopped", true}, {"already_gone", already_gone}, {"signals", signals}, {"pid", pid},
                           {"force", force}});
    return out;
  };
  if (pid <= 0) return finish_ok(true);
  auto st = QueryGroup(*c.session, pid);
  if (!st.ok()) return OutcomeFromSsh(st.status(), c.target);
  if (!st->any_alive()) return finish_ok(true);

  std::vector<std::pair<std::string, int64_t>> steps = {{"INT", grace_ms}, {"TERM", grace_ms}};
  if (force) steps.emplace_back("KILL", 5000);
  for (const auto& [sig, wait_ms] : steps) {
    if (ctx.cancelled.load()) return TaskOutcome::Failure("cancelled", "stop cancelled", false);
    auto sent = RunRemote(*c.session, SignalGroupArgv(sig, pid), std::chrono::seconds(30));
    if (!sent.ok()) return OutcomeFromSsh(sent.status(), c.target);
    signals.push_back("SIG" + sig);
    auto gone = WaitGone(c, pid, wait_ms, ctx, "SIG" + sig);
    if (!gone.ok()) return OutcomeFromSsh(gone.status(), c.target);
    if (*gone) return finish_ok(false);
  }
  out = TaskOutcome::Failure(
      "still_running",
      force ? fmt::format("pid {} (process group) survived SIGINT, SIGTERM and SIGKILL", pid)
            : fmt::format("pid {} is still running after SIGINT and SIGTERM ({} s grace each): stop it with "
                          "`npuprof stop RUN --force` (SIGKILL)",
                          pid, grace_ms / 1000),
      false);
  out.result = {{"stopped", false}, {"signals", signals}, {"pid", pid}, {"force", force}};
  return out;
}

}  // namespace npuprof::workers::service
