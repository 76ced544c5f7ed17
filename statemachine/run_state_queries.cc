#include "statemachine/run_state_queries.h"

#include <charconv>

namespace npuprof::sm {

uint64_t TaskNumber(std::string_view task_id) {
  const size_t dot = task_id.rfind(".t");
  if (dot == std::string_view::npos) return 0;
  uint64_t n = 0;
  const char* begin = task_id.data() + dot + 2;
  const char* end = task_id.data() + task_id.size();
  const auto [ptr, ec] = std::from_chars(begin, end, n);
  return ec == std::errc() && ptr == end ? n : 0;
}

const TaskInfo* LastTask(const RunState& s, std::string_view kind, std::string_view role) {
  const TaskInfo* best = nullptr;
  uint64_t best_no = 0;
  for (const auto& [id, t] : s.tasks) {
    if (t.kind != kind) continue;
    if (!role.empty() && !(t.payload.is_object() && t.payload.value("role", "") == role)) continue;
    const uint64_t no = TaskNumber(id);
    if (!best || no >= best_no) best = &t, best_no = no;
  }
  return best;
}

std::string TaskMachine(const TaskInfo& task) {
  if (!task.payload.is_object()) return "";
  auto m = task.payload.find("machine");
  if (m == task.payload.end() || !m->is_object()) return "";
  auto n = m->find("name");
  return n != m->end() && n->is_string() ? n->get<std::string>() : "";
}

const TaskInfo* LastTaskOn(const RunState& s, std::string_view kind, std::string_view machine) {
  const TaskInfo* best = nullptr;
  uint64_t best_no = 0;
  for (const auto& [id, t] : s.tasks) {
    if (t.kind != kind) continue;
    if (!machine.empty() && TaskMachine(t) != machine) continue;
    const uint64_t no = TaskNumber(id);
    if (!best || no >= best_no) best = &t, best_no = no;
  }
  return best;
}

json TaskResultData(const TaskInfo* t) {
  if (!t || t->status != TaskStatus::kSucceeded || !t->result.is_object()) return nullptr;
  return t->result.value("result", json(nullptr));
}

}  // namespace npuprof::sm
