// The one updating line `--wait` and `watch` show on a terminal: the run,
// its state, how long it has run, the step it is on, and — while queued —
// what it waits for. Fed with the run's events as the CLI reads them and, for
// a queued run, with `show`'s waiting_for. Pure: no I/O, no clock (the caller
// passes now).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace npuprof::cli {

struct RunProgress {
  std::string run_id;
  std::string state = "submitted";
  std::string step;             // kind of the latest task scheduled, "" when none
  int attempt = 1;
  int64_t started_ms = 0;       // time of the first event
  std::string waiting;          // while queued: what it waits for
  int64_t queued_ahead = -1;    // runs ahead on the machine, -1 unknown
  bool finished = false;
  std::string status;           // RunFinished's status
};

// One event of `npuprof events --json` (type, time_ms, payload).
void ApplyProgressEvent(RunProgress& p, const nlohmann::json& event);
// show's waiting_for (null clears it).
void ApplyWaitingFor(RunProgress& p, const nlohmann::json& waiting_for);
// The line, at most `width` columns (cut with "…"), without a newline; its
// control characters (a step or waiting reason from a target) escaped.
std::string ProgressLine(const RunProgress& p, int64_t now_ms, size_t width);

}  // namespace npuprof::cli
