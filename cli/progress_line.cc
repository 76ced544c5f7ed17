#include "cli/progress_line.h"

#include <fmt/format.h>

#include "common/terminal_text.h"
#include "common/utf8.h"

namespace npuprof::cli {

using nlohmann::json;

void ApplyProgressEvent(RunProgress& p, const json& e) {
  if (!e.is_object()) return;
  const std::string type = e.value("type", "");
  const json& payload = e.contains("payload") && e["payload"].is_object() ? e["payload"] : json::object();
  const int64_t t = e.contains("time_ms") && e["time_ms"].is_number_integer() ? e["time_ms"].get<int64_t>() : 0;
  if (p.started_ms == 0) p.started_ms = t;
  if (type == "StateChanged") {
    p.state = payload.value("to", p.state);
    if (p.state != "queued") p.waiting.clear(), p.queued_ahead = -1;
  } else if (type == "RunSubmitted") {
    p.state = "queued";
  } else if (type == "TaskScheduled" || type == "TaskRedispatched") {
    if (type == "TaskScheduled") p.step = payload.value("kind", p.step);
    p.attempt = payload.contains("attempt") && payload["attempt"].is_number_integer() ? payload["attempt"].get<int>() : 1;
  } else if (type == "RunFinished") {
    p.finished = true;
    p.status = payload.value("status", "");
  }
}

void ApplyWaitingFor(RunProgress& p, const json& w) {
  if (!w.is_object()) {
    p.waiting.clear();
    p.queued_ahead = -1;
    return;
  }
  p.waiting = w.value("reason", "");
  p.queued_ahead = w.contains("queued_ahead") && w["queued_ahead"].is_number_integer() ? w["queued_ahead"].get<int64_t>() : -1;
}

std::string ProgressLine(const RunProgress& p, int64_t now_ms, size_t width) {
  const int64_t secs = p.started_ms > 0 && now_ms > p.started_ms ? (now_ms - p.started_ms) / 1000 : 0;
  std::string line = fmt::format("{} {} {}:{:02}", p.run_id, p.finished ? p.status : p.state, secs / 60, secs % 60);
  if (!p.finished && !p.step.empty())
    line += " · " + p.step + (p.attempt > 1 ? fmt::format(" (attempt {})", p.attempt) : std::string());
  if (!p.finished && !p.waiting.empty()) {
    line += " · waiting";
    if (p.queued_ahead >= 0) line += fmt::format(" ({} ahead)", p.queued_ahead);
    line += ": " + p.waiting;
  }
  return TruncateUtf8(TerminalLine(line), width, "…");
}

}  // namespace npuprof::cli
