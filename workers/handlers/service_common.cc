#include "workers/handlers/service_common.h"

#include <thread>

#include "parsers/vllm_log_parser.h"

namespace npuprof::workers::service {

Call Open(const proto::Task& task, TaskContext& ctx) {
  Call c;
  c.payload = json::parse(task.payload_json(), nullptr, false);
  if (c.payload.is_discarded() || !c.payload.is_object()) {
    c.failure = TaskOutcome::Failure("bad_payload", "task payload is not a JSON object", false);
    return c;
  }
  auto target = TargetFromMachine(c.payload.value("machine", json::object()));
  if (!target.ok()) {
    c.failure = TaskOutcome::Failure("bad_payload", target.status().message(), false);
    return c;
  }
  c.target = *target;
  c.session = ctx.pool.Get(c.target);
  return c;
}

Result<GroupStatus> QueryGroup(ssh::SshSession& session, int64_t pid) {
  auto r = RunRemote(session, GroupStatusArgv(pid), std::chrono::seconds(30));
  if (!r.ok()) return r.status();
  if (r->exit_status != 0)
    return Status::Io("process status check failed on the target: " + TailLines(r->stderr_data, 3));
  return ParseGroupStatus(r->stdout_data);
}

Result<std::string> ReadTail(ssh::SshSession& session, const std::string& path, uint64_t max_bytes) {
  auto st = session.Stat(path);
  if (!st.ok()) {
    if (ssh::ErrorKindOf(st.status()) == ssh::SshErrorKind::kRemoteError) return std::string();
    return st.status();
  }
  const uint64_t off = st->size > max_bytes ? st->size - max_bytes : 0;
  return session.ReadFile(path, off, max_bytes);
}

json Diagnostics(ssh::SshSession& session, const std::string& rt, TaskOutcome& out) {
  json d = json::object();
  auto err = ReadTail(session, rt + "/stderr.log", 1 << 20);
  auto std_out = ReadTail(session, rt + "/stdout.log", 1 << 20);
  const std::string e = err.ok() ? *err : "";
  const std::string o = std_out.ok() ? *std_out : "";
  if (!e.empty()) out.blobs.emplace_back("stderr.log", e);
  if (!o.empty()) out.blobs.emplace_back("stdout.log", o);
  d["stderr_tail"] = TailLines(e, 30);
  d["stdout_tail"] = TailLines(o, 15);
  const parsers::VllmLogSummary summary = parsers::ParseVllmLog(o + "\n" + e);
  json errs = json::array();
  for (const auto& x : summary.env_errors) errs.push_back({{"kind", x.kind}, {"text", x.text}});
  d["env_errors"] = errs;
  d["env_hint"] = parsers::EnvErrorHint(summary.env_errors);
  return d;
}

bool SleepUnlessCancelled(TaskContext& ctx, std::chrono::milliseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
    if (ctx.cancelled.load()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(50),
        std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()) +
            std::chrono::milliseconds(1)));
  }
  return !ctx.cancelled.load();
}

}  // namespace npuprof::workers::service
