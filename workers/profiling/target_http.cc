#include "workers/profiling/target_http.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/base64.h"
#include "common/json_depth.h"
#include "workers/profiling/image_prep.h"
#include "workers/profiling/target_http_client.h"
#include "workers/profiling/target_interpreter.h"

namespace npuprof::profiling {

namespace {

using nlohmann::json;

// The program (see the header). Standard library only; nothing is sent
// before the magic line is out.
// Prepended to the program of a plan that reads the clock (run with -S).
constexpr const char* kSiteCustomize = "try:\n    import sitecustomize\nexcept Exception:\n    pass\n";

// The program's head: the magic line first, then the plan and the client
// (target_http_client.h) between kProgramHead and kProgramBody.
// Only what every plan needs is imported at the start (binascii for
// base64, not the base64 module; threading only for more than one slot, os
// only to report the interpreter): each module is milliseconds of the
// program's start before its first request (docs/PERFORMANCE.md run 61).
constexpr const char* kProgramHead = R"PY(import binascii, json, sys, time
w = sys.stdout
w.write("npuprof-target-http 1\n")
w.flush()
)PY";

constexpr const char* kProgramBody = R"PY(plan = json.loads("".join(sys.argv[1:]))
port, tmo, cap, reqs = plan["port"], plan["timeout_s"], plan["max_body"], plan["requests"]
LIMIT = 16 << 20
def clock():
    f = getattr(time, "time_ns", None)
    return f() if f else int(time.time() * 1e9)
def ms(t0):
    return int((time.monotonic() - t0) * 1000)
def one(r):
    t0 = time.monotonic()
    try:
        status, reason, body, size = npuprof_http(port, r["m"], r["p"], binascii.a2b_base64(r["b"]), r["t"], tmo, cap,
                                                  LIMIT)
        return {"status": status, "reason": reason[:200], "latency_ms": ms(t0), "size": size,
                "body": binascii.b2a_base64(body, newline=False).decode("ascii")}
    except Exception as e:
        return {"error": (type(e).__name__ + ": " + str(e))[:300], "latency_ms": ms(t0)}
out = [None] * len(reqs)
nxt = [0]
slots = max(1, min(plan["concurrency"], len(reqs)))
if slots > 1:
    import threading
    lock = threading.Lock()
def slot():
    while True:
        if slots > 1:
            lock.acquire()
        i = nxt[0]
        nxt[0] += 1
        if slots > 1:
            lock.release()
        if i >= len(reqs):
            return
        out[i] = one(reqs[i])
d = {}
before = clock() if plan["clock"] else 0
t0 = time.monotonic()
if slots > 1:
    ts = [threading.Thread(target=slot) for _ in range(slots)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
else:
    slot()
d["wall_ms"] = ms(t0)
if plan["clock"]:
    d["clock"] = {"before_ns": before, "after_ns": clock()}
if plan.get("exe"):
    import os
    e = sys.executable or ""
    ok = e and os.path.isabs(e) and os.access(e, os.X_OK)
    d["exe"] = binascii.b2a_base64(os.fsencode(e), newline=False).decode("ascii") if ok else ""
d["results"] = out
w.write(json.dumps(d, separators=(",", ":")) + "\n")
)PY";

bool Clean(std::string_view s, bool allow_space) {
  return std::none_of(s.begin(), s.end(),
                      [&](char c) { return c == '\r' || c == '\n' || c == '\0' || (!allow_space && c == ' '); });
}

Status Bad(const std::string& what, std::string_view out, int exit_status, std::string_view err) {
  std::string tail(err.substr(err.size() > 300 ? err.size() - 300 : 0));
  for (char& c : tail)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = ' ';
  return Status::Corruption(fmt::format(
      "the HTTP program on the target started but its digest {} (exit {}, {} bytes of output{}); its requests "
      "may have been sent",
      what, exit_status, out.size(), tail.empty() ? "" : ", stderr ends: " + tail));
}

bool Int(const json& j, const char* key, int64_t lo, int64_t hi, int64_t* v) {
  if (!j.contains(key) || !j[key].is_number_integer()) return false;
  const int64_t x = j[key].get<int64_t>();
  if (x < lo || x > hi) return false;
  *v = x;
  return true;
}

bool OnlyKeys(const json& j, const std::set<std::string>& keys) {
  for (const auto& [k, v] : j.items())
    if (!keys.count(k)) return false;
  return true;
}

constexpr int64_t kMaxMs = int64_t{1} << 40;

}  // namespace

std::optional<std::vector<std::string>> TargetHttpArgv(const TargetHttpPlan& plan) {
  const uint64_t per_answer = (std::clamp<uint64_t>(plan.max_body, 1, kMaxBodyRead) + 2) / 3 * 4 + 512;
  if (per_answer * plan.requests.size() > kMaxDigestBytes) return std::nullopt;
  json reqs = json::array();
  for (const auto& r : plan.requests) {
    if (r.method.empty() || !Clean(r.method, false) || r.path.empty() || r.path[0] != '/' || !Clean(r.path, false) ||
        !Clean(r.content_type, true))
      return std::nullopt;
    reqs.push_back({{"m", r.method}, {"p", r.path}, {"t", r.content_type}, {"b", Base64(r.body)}});
  }
  const json doc = {{"port", plan.port},
                    {"concurrency", std::clamp(plan.concurrency, 1, 4096)},
                    {"timeout_s", std::max<int64_t>(1, plan.timeout.count())},
                    {"max_body", std::clamp<uint64_t>(plan.max_body, 1, kMaxBodyRead)},
                    {"clock", plan.clock},
                    {"exe", plan.report_interpreter},
                    {"requests", reqs}};
  // Method, path and content type are checked ASCII-clean above; everything
  // else is numbers and base64, so the dump cannot meet invalid UTF-8.
  const std::string text = doc.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > kMaxPlanBytes) return std::nullopt;
  // -I -S: no site-packages start-up hooks, no PYTHONPATH (the standard
  // library is all it needs); a plan that reads the clock runs as npuprof's
  // clock exchange does (-S, PYTHONPATH kept, the host's sitecustomize
  // imported by the program itself: workers/ssh/clock_exchange_protocol.cc),
  // so it reads the clock the target's own Python programs see without
  // paying for the site-packages' .pth files.
  if (plan.interpreter != kDefaultInterpreter && !CheckInterpreterPath(plan.interpreter).ok()) return std::nullopt;
  const std::string program = std::string(kProgramHead) + kTargetHttpClientPy + kProgramBody;
  std::vector<std::string> argv = {plan.interpreter, "-S", "-c", std::string(kSiteCustomize) + program};
  if (!plan.clock) argv = {plan.interpreter, "-I", "-S", "-c", program};
  for (size_t at = 0; at < text.size(); at += kArgPieceBytes) argv.push_back(text.substr(at, kArgPieceBytes));
  return argv;
}

std::chrono::milliseconds TargetHttpDeadline(const TargetHttpPlan& plan) {
  const int64_t n = static_cast<int64_t>(plan.requests.size());
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(std::clamp(plan.concurrency, 1, 4096), n));
  const int64_t rounds = std::max<int64_t>(1, (n + slots - 1) / slots);
  const int64_t per = std::clamp<int64_t>(plan.timeout.count(), 1, 86400);
  return std::chrono::seconds(std::min<int64_t>(rounds * per + 30, int64_t{7} * 86400));
}

Result<std::optional<TargetHttpDigest>> ParseTargetHttpOutput(std::string_view out, int exit_status,
                                                              std::string_view err, const TargetHttpPlan& plan) {
  const std::string magic = std::string(kTargetHttpMagic) + "\n";
  if (out.substr(0, magic.size()) != magic) return std::optional<TargetHttpDigest>();  // never started
  std::string_view rest = out.substr(magic.size());
  if (rest.empty()) return Bad("is missing (killed, or it failed before the end)", out, exit_status, err);
  if (rest.back() != '\n' || rest.find('\n') != rest.size() - 1)
    return Bad("is not one line", out, exit_status, err);
  auto doc = ParseJson(rest.substr(0, rest.size() - 1), kMaxTargetJsonDepth);
  if (!doc.ok()) return Bad("is not JSON (" + doc.status().message() + ")", out, exit_status, err);
  const json& j = *doc;
  if (!j.is_object() || !OnlyKeys(j, {"wall_ms", "clock", "exe", "results"}))
    return Bad("is not an object of wall_ms, clock, exe and results", out, exit_status, err);
  TargetHttpDigest d;
  if (!Int(j, "wall_ms", 0, kMaxMs, &d.wall_ms)) return Bad("has no 'wall_ms' (ms, >= 0)", out, exit_status, err);
  if (j.contains("clock") != plan.clock)
    return Bad(plan.clock ? "has no 'clock'" : "has a 'clock' it was not asked for", out, exit_status, err);
  if (plan.clock) {
    const json& c = j["clock"];
    int64_t b = 0, a = 0;
    if (!c.is_object() || !OnlyKeys(c, {"before_ns", "after_ns"}) ||
        !Int(c, "before_ns", 1, INT64_MAX, &b) || !Int(c, "after_ns", b, INT64_MAX, &a))
      return Bad("has a 'clock' that is not {before_ns, after_ns >= before_ns} (ns > 0)", out, exit_status, err);
    d.before_ns = b;
    d.after_ns = a;
  }
  if (j.contains("exe") != plan.report_interpreter)
    return Bad(plan.report_interpreter ? "has no 'exe'" : "has an 'exe' it was not asked for", out, exit_status, err);
  if (plan.report_interpreter) {
    if (!j["exe"].is_string()) return Bad("has an 'exe' that is not text (base64)", out, exit_status, err);
    auto exe = DecodeBase64(j["exe"].get_ref<const std::string&>());
    if (!exe.ok()) return Bad("has an 'exe' that is not base64: " + exe.status().message(), out, exit_status, err);
    // A path that fails the check is not used; the answers stand.
    if (!exe->empty())
      if (auto checked = CheckInterpreterPath(*exe); checked.ok()) d.interpreter = std::move(checked).value();
  }
  if (!j.contains("results") || !j["results"].is_array() || j["results"].size() != plan.requests.size())
    return Bad(fmt::format("has no 'results' list of {} answers", plan.requests.size()), out, exit_status, err);
  const uint64_t max_body = std::clamp<uint64_t>(plan.max_body, 1, kMaxBodyRead);
  for (size_t i = 0; i < plan.requests.size(); ++i) {
    const json& r = j["results"][i];
    const auto bad = [&](const std::string& what) {
      return Bad(fmt::format("answer {} {}", i, what), out, exit_status, err);
    };
    TargetHttpAnswer a;
    if (!r.is_object()) return bad("is not an object");
    if (!Int(r, "latency_ms", 0, kMaxMs, &a.latency_ms)) return bad("has no 'latency_ms' (ms, >= 0)");
    if (r.contains("error")) {
      if (!OnlyKeys(r, {"error", "latency_ms"}) || !r["error"].is_string())
        return bad("is not {error: text, latency_ms}");
      a.error = r["error"].get<std::string>().substr(0, 300);
      d.answers.push_back(std::move(a));
      continue;
    }
    if (!OnlyKeys(r, {"status", "reason", "latency_ms", "size", "body"}))
      return bad("is not {status, reason, latency_ms, size, body}");
    int64_t status = 0, size = 0;
    if (!Int(r, "status", 100, 999, &status)) return bad("has no 'status' (100-999)");
    if (!Int(r, "size", 0, static_cast<int64_t>(kMaxBodyRead), &size)) return bad("has no 'size' (0-16 MiB)");
    if (!r.contains("reason") || !r["reason"].is_string()) return bad("has no 'reason' (text)");
    if (!r.contains("body") || !r["body"].is_string()) return bad("has no 'body' (base64)");
    auto body = DecodeBase64(r["body"].get_ref<const std::string&>());
    if (!body.ok()) return bad("has a 'body' that is not base64: " + body.status().message());
    if (body->size() > max_body || body->size() > static_cast<uint64_t>(size) ||
        (body->size() < static_cast<uint64_t>(size) && body->size() != max_body))
      return bad(fmt::format("has a body of {} bytes against size {} and the cap {}", body->size(), size, max_body));
    a.answered = true;
    a.status = static_cast<int>(status);
    a.reason = r["reason"].get<std::string>().substr(0, 200);
    a.size = static_cast<uint64_t>(size);
    a.body = std::move(body).value();
    d.answers.push_back(std::move(a));
  }
  return std::optional<TargetHttpDigest>(std::move(d));
}

}  // namespace npuprof::profiling
