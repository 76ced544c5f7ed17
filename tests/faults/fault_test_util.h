// Helpers shared by the fault and soak tests: polling runs through the CLI,
// finding which worker holds a task, reading a run's events.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {

using nlohmann::json;

inline json ShowRun(NpuprofHarness& h, const std::string& run) { return h.Cli({"show", run}, 30).json(); }

inline bool Finished(const json& s) { return s.is_object() && s.value("status", "running") != "running"; }

// Polls `show` until pred holds or timeout; returns the last summary.
template <typename Pred>
json WaitForRun(NpuprofHarness& h, const std::string& run, Pred pred, int timeout_s = 120) {
  json s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    s = ShowRun(h, run);
    if (s.is_object() && pred(s)) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
  }
  return s;
}

// The outstanding task of `kind` of a run, as "task id" ("" when none).
inline std::string OutstandingTask(const json& summary, const std::string& kind) {
  if (!summary.is_object()) return "";
  for (const auto& t : summary.value("outstanding_tasks", json::array()))
    if (t.value("kind", "") == kind && t.value("status", "") == "pending") return t.value("task_id", "");
  return "";
}

// pid of the worker that holds task_id (-1 when none does).
inline pid_t HolderOf(NpuprofHarness& h, const std::string& task_id) {
  json w = h.Cli({"workers"}, 30).json();
  if (!w.is_object()) return -1;
  for (const auto& wk : w.value("workers", json::array()))
    for (const auto& t : wk.value("tasks", json::array()))
      if (t == task_id) return wk.value("pid", -1);
  return -1;
}

inline json RunEvents(NpuprofHarness& h, const std::string& run) {
  json ev = h.Cli({"events", run, "--json"}, 60).json();
  return ev.is_object() ? ev.value("events", json::array()) : json::array();
}

inline int CountEvents(const json& events, const std::string& type, const std::string& task_id = "") {
  int n = 0;
  for (const auto& e : events)
    if (e.value("type", "") == type &&
        (task_id.empty() || (e["payload"].is_object() && e["payload"].value("task_id", "") == task_id)))
      ++n;
  return n;
}

}  // namespace npuprof::testing
