// memory.npu_smi, memory.logs: the live phases of a memory profile
// (read-only on the target; memory.infer is in memory_infer_handler.cc).
#include <algorithm>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "common/utf8.h"
#include "parsers/npu_smi_parser.h"
#include "parsers/vllm_log_parser.h"
#include "workers/handlers/service_common.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

namespace {

// HbmSnapshotJson with, per device, the processes npu-smi lists on it
// ("processes": [{"pid","name","memory_mb"}], at most 64; names made valid
// UTF-8 and cut to 64 bytes): whose HBM a device already holds (the advice
// names another user's process by its pid, docs/ADVISE.md).
json HbmWithProcesses(const parsers::NpuSmiSnapshot& snap) {
  json hbm = parsers::HbmSnapshotJson(snap);
  for (size_t i = 0; i < snap.devices.size(); ++i) {
    json procs = json::array();
    for (const auto& p : snap.processes) {
      if (p.npu != snap.devices[i].npu || p.chip != snap.devices[i].chip || procs.size() >= 64) continue;
      procs.push_back({{"pid", p.pid}, {"name", TruncateUtf8(ToValidUtf8(p.name), 64)}, {"memory_mb", p.memory_mb}});
    }
    if (snap.process_table_present) hbm[std::to_string(i)]["processes"] = std::move(procs);
  }
  return hbm;
}

}  // namespace

TaskOutcome MemNpuSmi(const tasks::MemoryNpuSmi& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  const std::string phase = p.phase().empty() ? "snapshot" : p.phase();
  auto run = RunRemote(*c->session, {"npu-smi", "info"}, NpuSmiTimeout(p.machine()));
  if (!run.ok()) return OutcomeFromSsh(run.status(), c->target);
  if (run->exit_status == 127 || (run->stdout_data.empty() && run->stderr_data.find("not found") != std::string::npos))
    return TaskOutcome::Failure("npu_smi_missing",
                                fmt::format("npu-smi is not on PATH on {} (env script '{}'){}: install the Ascend "
                                            "driver or fix the machine's env script",
                                            mem::MachineName(*c), c->target.env_script, EnvScriptHint(*c->session)),
                                false);
  TaskOutcome out;
  out.blobs.emplace_back(phase + "_npu_smi.txt", run->stdout_data);
  if (run->exit_status != 0) {
    out.error_kind = "npu_smi_failed";
    out.error = fmt::format("npu-smi info {}: {}", ExitText(*run), TailLines(run->stderr_data, 5));
    return out;
  }
  auto snap = parsers::ParseNpuSmi(run->stdout_data);
  if (!snap.ok()) {
    out.error_kind = "unparseable";
    out.error = "npu-smi output could not be parsed (raw text kept as evidence): " + snap.status().message();
    return out;
  }
  out.ok = true;
  out.result = {{"phase", phase}, {"hbm", HbmWithProcesses(*snap)}, {"device_count", snap->devices.size()}};
  return out;
}

TaskOutcome MemLogs(const tasks::MemoryLogs& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  return MemLogsOn(p, *c);
}

TaskOutcome MemLogsOn(const tasks::MemoryLogs& p, mem::Ctx& c0) {
  mem::Ctx* c = &c0;
  std::string text;
  json parts = json::object();
  std::vector<std::pair<const char*, std::string>> logs;
  for (const auto& [f, given] : {std::pair<const char*, const std::string&>{"stdout_log", p.stdout_log()},
                                 std::pair<const char*, const std::string&>{"stderr_log", p.stderr_log()}}) {
    auto resolved = service::ResolveRemotePath(*c->session, given);  // "~/" runtime dirs
    if (!resolved.ok()) return service::RemoteFailure(resolved.status(), c->target);
    if (!resolved->empty()) logs.emplace_back(f, *resolved);
  }
  std::vector<std::string> paths;
  for (const auto& l : logs) paths.push_back(l.second);
  auto read = ReadHeadTails(*c->session, paths, kLogReadCap);  // both in one round trip
  for (size_t i = 0; i < logs.size(); ++i) {
    const char* f = logs[i].first;
    const std::string& path = logs[i].second;
    auto& data = read[i];
    if (!data.ok()) {
      if (ssh::ErrorKindOf(data.status()) == ssh::SshErrorKind::kRemoteError) {
        parts[f] = {{"path", path}, {"missing", true}};
        continue;
      }
      return OutcomeFromSsh(data.status(), c->target);
    }
    parts[f] = {{"path", path}, {"bytes", data->size()}};
    text += *data;
    if (!text.empty() && text.back() != '\n') text += '\n';
  }
  const auto summary = parsers::ParseVllmLog(text);
  TaskOutcome out = TaskOutcome::Success(json{{"summary", parsers::VllmLogToJson(summary)},
                                              {"bytes", text.size()},
                                              {"parts", parts},
                                              {"env_error_hint", parsers::EnvErrorHint(summary.env_errors)}});
  out.blobs.emplace_back("vllm_serve.log", text);
  return out;
}

}  // namespace npuprof::workers
