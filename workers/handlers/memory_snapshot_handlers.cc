// memory.npu_smi, memory.logs, memory.infer: the live phases of a memory
// profile (read-only on the target, except the one inference request).
#include <algorithm>
#include <charconv>

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

namespace {

// The target's clock in ns since the epoch (`date +%s%N`), or why not: a
// `date` without %N (busybox prints it literally) or any other output is no
// reading. Bytes from the target are checked, never trusted.
Result<int64_t> ReadTargetClockNs(ssh::SshSession& session) {
  auto run = RunRemote(session, {"date", "+%s%N"}, std::chrono::seconds(30));
  if (!run.ok()) return run.status();
  std::string out = run->stdout_data.substr(0, 64);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  int64_t ns = 0;
  const auto [end, ec] = std::from_chars(out.data(), out.data() + out.size(), ns);
  if (run->exit_status != 0 || out.size() < 16 || ec != std::errc() || end != out.data() + out.size() || ns <= 0)
    return Status::Invalid(fmt::format("`date +%s%N` on the target gave no nanosecond clock (exit {}, output '{}')",
                                       run->exit_status, out.substr(0, 40)));
  return ns;
}

}  // namespace

TaskOutcome MemInfer(const tasks::MemoryInfer& p, const proto::Task&, TaskContext& tc) {
  TaskOutcome fail;
  auto c = mem::Open(p.machine(), tc, &fail);
  if (!c) return fail;
  if (!p.has_port() || p.port() <= 0 || p.port() > 65535)
    return TaskOutcome::Failure("bad_payload", "inference needs the service port", false);
  const std::string& model = p.served_model_name();
  const int64_t max_tokens = p.max_tokens();
  const std::string& prompt = p.prompt();
  const bool image = p.has_image_url();
  ssh::HttpRequest req;
  req.remote_port = p.port();
  req.method = "POST";
  req.headers = {{"Content-Type", "application/json"}};
  req.timeout = std::chrono::seconds(std::clamp<int64_t>(p.timeout_s(), 1, 86400));
  json body;
  if (image) {
    req.path = "/v1/chat/completions";
    body = {{"model", model},
            {"max_tokens", max_tokens},
            {"temperature", 0},
            {"messages", json::array({{{"role", "user"},
                                       {"content", json::array({{{"type", "image_url"},
                                                                 {"image_url", {{"url", p.image_url()}}}},
                                                                {{"type", "text"}, {"text", prompt}}})}}})}};
  } else {
    req.path = "/v1/completions";
    body = {{"model", model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
  }
  req.body = body.dump();
  // The target's clock around the request: the series it is cut from
  // (msprof npu_mem) is stamped on that clock, not the server's.
  auto before = ReadTargetClockNs(*c->session);
  auto resp = c->session->Http(req);
  Result<int64_t> after = Status::Invalid("the clock was not read after the request");
  if (before.ok() && resp.ok()) after = ReadTargetClockNs(*c->session);
  if (!resp.ok()) {
    TaskOutcome o = OutcomeFromSsh(resp.status(), c->target);
    o.error_kind = "inference_failed";
    o.retryable = false;
    return o;
  }
  const bool ok = resp->status >= 200 && resp->status < 300;
  const Result<json> parsed = ParseJson(resp->body, kMaxTargetJsonDepth);
  json usage = parsed.ok() && parsed->is_object() ? parsed->value("usage", json(nullptr)) : json(nullptr);
  TaskOutcome out;
  out.blobs.emplace_back("inference_response.json", resp->body);
  out.result = {{"endpoint", req.path}, {"http_status", resp->status}, {"ok", ok},
                {"latency_ms", resp->latency_ms}, {"usage", usage}, {"max_tokens", max_tokens}};
  if (before.ok() && after.ok())
    out.result["target_clock"] = {{"before_ns", *before}, {"after_ns", *after}};
  else
    out.result["target_clock_error"] = (before.ok() ? after.status() : before.status()).message();
  if (!ok) {
    out.error_kind = "inference_failed";
    out.error = fmt::format("POST {} answered {}: {}", req.path, resp->status, resp->body.substr(0, 500));
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace npuprof::workers
