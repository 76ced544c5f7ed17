// TaskLinkTable: a run's task attempts with what each cost on the link to
// its targets (statemachine/task_link.h), from the run's events: what
// `npuprof show` lists under "tasks" and the far-target benchmark sums per
// task kind.
//
// Input: the events as `npuprof events RUN --json` returns them
// ({type, time_ms, payload, ...}, in order). One row per attempt: opened by
// TaskScheduled or TaskRedispatched, closed by the attempt's TaskSucceeded /
// TaskFailed (its figures, when the event records them), by a
// TaskRedispatched that replaced it (outcome "lost (<reason>)": no worker
// answered, no figures) or by TaskAbandoned. A row still open is
// "in flight" (or "unanswered" once the run has finished).
//
// Figures that are not there are never shown as zeros: a row without them
// has no link; the total sums the rows that have them and says how many
// answered attempts did not record them (events written before npuprof
// recorded them). A row whose figures do not decode keeps the error (the
// run is still shown). The total of a run none of whose attempts recorded
// figures is "not recorded".
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "statemachine/task_link.h"

namespace npuprof::views {

struct TaskAttemptLink {
  std::string task_id, kind, machine;  // machine: the payload's machine (several joined by "+"), "" if none
  int64_t attempt = 1;
  std::string outcome;  // succeeded | failed | lost (<reason>) | abandoned | in flight | unanswered
  int64_t start_ms = 0, end_ms = -1;
  std::optional<events::TaskLink> link;
  std::string link_error;  // the figures were there but did not decode
};

struct TaskLinkTable {
  std::vector<TaskAttemptLink> attempts;
  events::TaskLink total;  // over the attempts with figures
  int recorded = 0;        // attempts with figures
  int unrecorded = 0;      // answered attempts without (written before the figures were recorded)
};

TaskLinkTable BuildTaskLinkTable(const nlohmann::json& events);

// {"tasks": [{task_id, kind, machine, attempt, outcome, round_trips, link_ms,
// link: {every figure}} ...], "link_total": {recorded_attempts,
// unrecorded_attempts, every figure} or "not recorded"}; a row without
// figures has round_trips "not recorded" (lost attempts: "no answer") and no link.
nlohmann::json TaskLinkTableJson(const TaskLinkTable& t);

// The same as a text table, one attempt a line, then the total.
std::string TaskLinkTableText(const TaskLinkTable& t);

}  // namespace npuprof::views
