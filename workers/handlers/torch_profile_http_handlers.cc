// torch_profile.prepare_image, torch_profile.control, torch_profile.requests:
// everything that talks HTTP to the profiled service is asked on the target
// (target_http_run.h: one python3 program, one round trip), or, where that
// program cannot run, over SSH direct-tcpip channels (no local port is
// opened either way).
#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "workers/handlers/target_http_run.h"
#include "workers/handlers/torch_profile_handlers.h"
#include "workers/profiling/chat_requests.h"
#include "workers/profiling/image_prep.h"
#include "workers/remote.h"

namespace npuprof::workers {

namespace {

// Runs fn on another thread, reporting progress (which extends the lease)
// every two seconds until it returns.
template <typename Fn>
auto WithProgress(TaskContext& ctx, const std::string& what, Fn fn) -> decltype(fn()) {
  auto fut = std::async(std::launch::async, std::move(fn));
  int ticks = 0;
  while (fut.wait_for(std::chrono::seconds(2)) != std::future_status::ready)
    ctx.progress(fmt::format("{} ({} s)", what, 2 * ++ticks));
  return fut.get();
}

// Long HTTP calls (profiler control waits minutes, the wave holds many
// channels) get an SSH session of their own while they run: the shared one
// serialises every call of this worker to the target, and a service.stop
// (cleanup, cancel) must not wait behind a running wave. The pool lends it
// and takes it back afterwards, so later tasks reuse its connection.
std::shared_ptr<ssh::SshSession> OwnSession(TaskContext& ctx, const ssh::SshTarget& target) {
  return ctx.pool.Acquire(target);
}

// An image height the payload left unset is the usual 480.
int ImageHeight(int64_t given) { return given > 0 ? static_cast<int>(std::min<int64_t>(given, 1 << 14)) : 480; }

// More requests than one task should ever hold in memory at once.
constexpr int64_t kMaxRequestsPerTask = 1'000'000;

std::string Printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) out += (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) ? c : '?';
  return out;
}

}  // namespace


TaskOutcome TorchProfilePrepareImage(const tasks::TorchProfilePrepareImage& p, const proto::Task&, TaskContext&) {
  const std::string& path = p.image_path();
  auto img = profiling::PrepareImageFile(path, ImageHeight(p.image_height()));
  if (!img.ok()) return TaskOutcome::Failure("bad_image", img.status().message(), false);
  TaskOutcome out = TaskOutcome::Success(json{{"image_meta", profiling::ImageMeta(path, *img)}});
  out.blobs.emplace_back("image.png", img->png);
  return out;
}

TaskOutcome TorchProfileControl(const tasks::TorchProfileControl& p, const proto::Task&, TaskContext& ctx) {
  const std::string& action = p.action();
  if (action != "start_profile" && action != "stop_profile")
    return TaskOutcome::Failure("bad_payload", "action must be start_profile or stop_profile", false);
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  auto session = OwnSession(ctx, *target);
  ssh::HttpRequest req;
  req.remote_port = p.port();
  req.method = "POST";
  req.path = "/" + action;
  req.timeout = std::chrono::seconds(std::clamp<int64_t>(p.timeout_s(), 1, 86400));
  profiling::TargetHttpPlan plan;
  plan.port = p.port();
  plan.timeout = std::chrono::duration_cast<std::chrono::seconds>(req.timeout);
  plan.requests.push_back({.method = "POST", .path = req.path});
  const auto r = WithProgress(ctx, "waiting for /" + action, [&]() -> Result<ssh::HttpResponse> {
    auto ran = RunTargetHttp(*session, plan);
    if (!ran.ok()) return ran.status();
    if (!ran->has_value()) return session->Http(req);  // no python3 there: nothing was sent
    return AsHttpResponse((*ran)->answers.at(0), p.port());
  });
  if (!r.ok()) {
    TaskOutcome o = OutcomeFromSsh(r.status(), *target);
    o.error = fmt::format("POST /{} got no answer: {}", action, o.error);
    o.result = json{{"action", action}, {"ok", false}, {"status", nullptr}, {"error", o.error}};
    return o;
  }
  const bool ok = r->status >= 200 && r->status < 300;
  TaskOutcome out = TaskOutcome::Success(json{{"action", action},
                                              {"ok", ok},
                                              {"status", r->status},
                                              {"latency_ms", r->latency_ms},
                                              {"body", Printable(r->body, 16384)}});
  out.blobs.emplace_back(action + "_response.txt", r->body);
  return out;
}

TaskOutcome TorchProfileRequests(const tasks::TorchProfileRequests& p, const proto::Task&, TaskContext& ctx) {
  auto target = TargetFromMachine(p.machine());
  if (!target.ok()) return TaskOutcome::Failure("bad_payload", target.status().message(), false);
  const std::string& role = p.role();
  const int64_t total = p.total();
  const int64_t first = p.first_index();
  if (total < 0 || total > kMaxRequestsPerTask)
    return TaskOutcome::Failure("bad_payload", fmt::format("total {} is not 0..{} requests", total, kMaxRequestsPerTask),
                                false);
  std::string image_url;
  if (p.request_kind() == "vl") {
    auto img = profiling::PrepareImageFile(p.image_path(), ImageHeight(p.image_height()));
    if (!img.ok()) return TaskOutcome::Failure("bad_image", img.status().message(), false);
    image_url = profiling::PngDataUrl(*img);
  }
  std::vector<ssh::HttpRequest> reqs;
  for (int64_t i = 0; i < total; ++i) {
    ssh::HttpRequest req;
    req.remote_port = p.port();
    req.method = "POST";
    req.path = "/v1/chat/completions";
    req.headers = {{"Content-Type", "application/json"}};
    req.body = profiling::ChatBody(p.served_model_name(), profiling::BuildPrompt(first + i, p.prompt_tokens()),
                                   p.max_tokens(), image_url)
                   .dump();
    req.timeout = std::chrono::seconds(std::clamp<int64_t>(p.timeout_s(), 1, 86400));
    reqs.push_back(std::move(req));
  }
  auto session = OwnSession(ctx, *target);
  const int concurrency = static_cast<int>(std::clamp<int64_t>(p.concurrency(), 1, 4096));
  // On the target: every request sent from there, each latency measured
  // there; the body of each answer kept up to what its record keeps.
  profiling::TargetHttpPlan plan;
  plan.port = p.port();
  plan.concurrency = concurrency;
  plan.timeout = std::chrono::seconds(std::clamp<int64_t>(p.timeout_s(), 1, 86400));
  plan.max_body = profiling::kRecordBodyMax + 1;
  for (const auto& r : reqs)
    plan.requests.push_back({.method = r.method, .path = r.path, .content_type = "application/json", .body = r.body});
  std::vector<Result<ssh::HttpResponse>> responses;
  std::vector<uint64_t> sizes;  // each body's whole size when asked on the target
  const auto wave_start = std::chrono::steady_clock::now();
  std::optional<int64_t> target_wall_ms;
  WithProgress(ctx, fmt::format("{}: {} requests in flight", role, total), [&] {
    if (reqs.empty()) return 0;  // nothing to send, no program to start
    auto ran = RunTargetHttp(*session, plan);
    if (ran.ok() && !ran->has_value()) {  // no python3 there (nothing was sent): over direct-tcpip channels
      responses = session->HttpMany(reqs, concurrency);
      return 0;
    }
    if (!ran.ok()) {  // never sent again: every request of the wave failed with that error
      responses.assign(reqs.size(), ran.status());
      return 0;
    }
    target_wall_ms = (*ran)->wall_ms;
    for (const auto& a : (*ran)->answers) {
      responses.push_back(AsHttpResponse(a, p.port()));
      sizes.push_back(a.size);
    }
    return 0;
  });
  // The wave's wall time: first request sent to last answer (throughput);
  // measured on the target when the wave ran there.
  const int64_t wall_ms = target_wall_ms.value_or(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - wave_start).count());
  json results = json::array();
  int64_t ok = 0;
  for (size_t i = 0; i < responses.size(); ++i) {
    json rec = profiling::RequestRecord(first + static_cast<int64_t>(i), responses[i], -1,
                                        i < sizes.size() ? sizes[i] : 0);
    if (rec.value("ok", false)) ++ok;
    results.push_back(std::move(rec));
  }
  return TaskOutcome::Success(
      json{{"role", role}, {"total", total}, {"ok_count", ok}, {"wall_ms", wall_ms}, {"results", results}});
}

}  // namespace npuprof::workers
