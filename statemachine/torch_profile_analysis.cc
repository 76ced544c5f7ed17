#include "statemachine/torch_profile_analysis.h"

#include <cstdlib>
#include <vector>

#include "statemachine/torch_profile_gates.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {

namespace {

long TaskNumber(const std::string& id) {
  const size_t pos = id.rfind(".t");
  return pos == std::string::npos ? 0 : std::strtol(id.c_str() + pos + 2, nullptr, 10);
}

std::vector<const TaskInfo*> TasksInOrder(const RunState& s, const std::string& kind) {
  std::vector<const TaskInfo*> out;
  for (const auto& [id, t] : s.tasks)
    if (t.kind == kind) out.push_back(&t);
  std::sort(out.begin(), out.end(),
            [](const TaskInfo* a, const TaskInfo* b) { return TaskNumber(a->task_id) < TaskNumber(b->task_id); });
  return out;
}

TaskPolicy AnalysePolicy() { return TaskPolicy::WithLease(60000); }

json MissingRank(const std::string& dir, const std::string& error) {
  return json{{"path", dir},
              {"outputs",
               {{"kernel_details_csv", {{"path", dir + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv"}, {"exists", false}}},
                {"trace_view_json", {{"path", dir + "/ASCEND_PROFILER_OUTPUT/trace_view.json"}, {"exists", false}}}}},
              {"analysis_status", "missing_kernel_details"},
              {"error", error}};
}

}  // namespace

const TaskInfo* LastTask(const RunState& s, const std::string& kind, const std::string& role) {
  const TaskInfo* best = nullptr;
  for (const TaskInfo* t : TasksInOrder(s, kind))
    if (role.empty() || t->payload.value("role", "") == role) best = t;
  return best;
}

json TaskResultData(const TaskInfo* t) {
  if (!t || t->status != "succeeded" || !t->result.is_object()) return nullptr;
  return t->result.value("result", json(nullptr));
}

void ScheduleProfileListing(Decision& d, const std::string& root, int64_t analyse_timeout_s) {
  TaskPolicy p = AnalysePolicy();
  d.ScheduleTask(kTpListDirsTask,
                 json{{"machine", d.state().spec.value("machine_record", json::object())},
                      {"profile_root", root},
                      {"analyse_timeout_s", analyse_timeout_s}},
                 p);
}

bool ScheduleRankAnalyses(Decision& d, const json& list_result, int64_t analyse_timeout_s) {
  const json dirs = list_result.value("dirs", json::array());
  if (!dirs.is_array() || dirs.empty()) return false;
  for (const auto& dir : dirs) {
    d.ScheduleTask(kTpAnalyseRankTask,
                   json{{"machine", d.state().spec.value("machine_record", json::object())},
                        {"dir", dir},
                        {"analyse_timeout_s", analyse_timeout_s}},
                   AnalysePolicy());
  }
  return true;
}

bool AnalysisDone(const RunState& s) {
  const TaskInfo* list = LastTask(s, kTpListDirsTask);
  if (!list || list->in_flight() || list->status == "retry_wait") return false;
  for (const TaskInfo* t : TasksInOrder(s, kTpAnalyseRankTask))
    if (t->in_flight() || t->status == "retry_wait") return false;
  return true;
}

json AnalysisProjection(const RunState& s, int expected_ranks) {
  json out = {{"remote_profile_root", nullptr},
              {"remote_profile_dirs", json::array()},
              {"rank_count", nullptr},
              {"analysis_status", nullptr}};
  const TaskInfo* list = LastTask(s, kTpListDirsTask);
  if (!list) return out;
  out["remote_profile_root"] = list->payload.value("profile_root", "");
  const json listed = TaskResultData(list);
  if (listed.is_object()) out["rank_count"] = listed.value("dirs", json::array()).size();
  std::vector<std::string> statuses;
  for (const TaskInfo* t : TasksInOrder(s, kTpAnalyseRankTask)) {
    const std::string dir = t->payload.value("dir", "");
    json rec;
    if (t->status == "succeeded") {
      rec = TaskResultData(t);
    } else if (t->status == "failed") {
      const json& f = t->result;
      rec = MissingRank(dir, f.value("error_kind", "") + ": " + f.value("error", ""));
    } else if (t->status == "abandoned") {
      rec = MissingRank(dir, "analyse abandoned");
      rec["analysis_status"] = "abandoned";
    } else {
      rec = MissingRank(dir, "");
      rec["analysis_status"] = "pending";
      rec.erase("error");
    }
    statuses.push_back(rec.value("analysis_status", "missing_kernel_details"));
    out["remote_profile_dirs"].push_back(std::move(rec));
  }
  if (AnalysisDone(s)) {
    if (list->status != "succeeded") {
      out["analysis_status"] = "no_profile_dirs";
    } else {
      out["analysis_status"] = AnalysisGate(statuses, expected_ranks);
    }
  }
  return out;
}

}  // namespace npuprof::sm
