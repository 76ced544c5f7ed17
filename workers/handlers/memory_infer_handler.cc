// memory.infer: the memory profile's one inference request, with the
// target's clock read around it (the window its activation peak is cut
// from). Asked on the target (target_http_run.h): the clock, the request and
// the clock again in one remote command; where that program cannot run,
// `date +%s%N`, the request over a direct-tcpip channel and `date` again.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/time_util.h"

#include "common/json_depth.h"
#include "workers/handlers/target_http_run.h"
#include "workers/memory/memory_common.h"
#include "workers/memory/memory_tasks.h"

namespace npuprof::workers {

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

TaskOutcome MemInfer(const tasks::MemoryInfer& p, const proto::Task& task, TaskContext& tc) {
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
  profiling::TargetHttpPlan plan;
  plan.port = p.port();
  plan.timeout = std::chrono::duration_cast<std::chrono::seconds>(req.timeout);
  plan.clock = true;
  plan.requests.push_back({.method = "POST", .path = req.path, .content_type = "application/json", .body = req.body});
  Result<int64_t> before = Status::Invalid("the clock was not read before the request");
  Result<int64_t> after = Status::Invalid("the clock was not read after the request");
  Result<ssh::HttpResponse> resp = Status::Invalid("the request was not sent");
  if (auto ran = RunTargetHttp(*c->session, plan); !ran.ok()) {
    resp = ran.status();  // never sent again: it may have reached the service
  } else if (ran->has_value()) {
    before = *(*ran)->before_ns;
    after = *(*ran)->after_ns;
    resp = AsHttpResponse((*ran)->answers.at(0), p.port());
  } else {  // no python3 there: nothing was sent
    before = ReadTargetClockNs(*c->session);
    resp = c->session->Http(req);
    if (before.ok() && resp.ok()) after = ReadTargetClockNs(*c->session);
  }
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
  // The after-inference snapshot when the payload asks (then_snapshot):
  // memory.npu_smi's own handler, read-only; left to its task when it fails.
  if (p.has_then_snapshot() && !tc.cancelled.load()) {
    const int64_t t0 = NowMs();
    tasks::MemoryNpuSmi then = p.then_snapshot();
    if (!then.has_machine()) *then.mutable_machine() = p.machine();
    TaskOutcome snap = MemNpuSmi(then, task, tc);
    if (snap.ok) {
      out.result["after_infer"] = std::move(snap.result);
      for (auto& b : snap.blobs) out.blobs.push_back(std::move(b));
    } else {
      spdlog::info("the inference's after-inference snapshot: {}: {}; left to its own task", snap.error_kind,
                   snap.error);
    }
    out.result["then_ms"] = std::max<int64_t>(0, NowMs() - t0);
  }
  return out;
}

}  // namespace npuprof::workers
