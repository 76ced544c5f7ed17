#include "statemachine/forget_ended.h"

#include <string>
#include <vector>

#include "statemachine/run_kind.h"

namespace npuprof::sm {

namespace {

bool Ended(const TaskInfo& t) {
  return t.status == TaskStatus::kSucceeded || t.status == TaskStatus::kFailed || t.status == TaskStatus::kAbandoned;
}

}  // namespace

void ForgetEndedTasks(const RunKind* kind, RunState& s, std::string_view task_kind) {
  if (kind == nullptr || !kind->ForgetsEndedTasks(task_kind)) return;
  std::vector<std::string> gone;
  for (auto it = s.tasks.begin(); it != s.tasks.end();) {
    if (it->second.kind == task_kind && Ended(it->second)) {
      gone.push_back(it->first);
      it = s.tasks.erase(it);
    } else {
      ++it;
    }
  }
  if (gone.empty()) return;
  // Their retry timers, once fired or cancelled (an ended task's retry timer is).
  for (auto it = s.timers.begin(); it != s.timers.end();) {
    const TimerInfo& t = it->second;
    bool named = false;
    if (!t.armed && t.purpose == "retry" && t.payload.is_object()) {
      const auto id = t.payload.find("task_id");
      if (id != t.payload.end() && id->is_string())
        for (const std::string& g : gone) named = named || g == id->get_ref<const std::string&>();
    }
    it = named ? s.timers.erase(it) : std::next(it);
  }
}

void ForgetFiredTimers(const RunKind* kind, RunState& s, std::string_view purpose) {
  if (kind == nullptr || !kind->ForgetsFiredTimers(purpose)) return;
  for (auto it = s.timers.begin(); it != s.timers.end();)
    it = !it->second.armed && it->second.purpose == purpose ? s.timers.erase(it) : std::next(it);
}

}  // namespace npuprof::sm
