#include "statemachine/torch_profile_analysis.h"

#include <algorithm>
#include <vector>

#include "task_payloads.pb.h"
#include "statemachine/task_payload.h"
#include "statemachine/torch_profile_gates.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {

namespace {

std::vector<const TaskInfo*> TasksInOrder(const RunState& s, const std::string& kind) {
  std::vector<const TaskInfo*> out;
  for (const auto& [id, t] : s.tasks)
    if (t.kind == kind) out.push_back(&t);
  std::sort(out.begin(), out.end(),
            [](const TaskInfo* a, const TaskInfo* b) { return TaskNumber(a->task_id) < TaskNumber(b->task_id); });
  return out;
}

json MissingRank(const std::string& dir, const std::string& error) {
  return json{{"path", dir},
              {"outputs",
               {{"kernel_details_csv", {{"path", dir + "/ASCEND_PROFILER_OUTPUT/kernel_details.csv"}, {"exists", false}}},
                {"trace_view_json", {{"path", dir + "/ASCEND_PROFILER_OUTPUT/trace_view.json"}, {"exists", false}}}}},
              {"analysis_status", "missing_kernel_details"},
              {"error", error}};
}

// Names of the *_ascend_pt dirs the flush wait saw without profiler_info when
// it timed out (torch_npu never finalised them); empty otherwise.
std::vector<std::string> UnfinalisedDirs(const RunState& s) {
  std::vector<std::string> out;
  const json flush = s.data.value("flush", json(nullptr));
  if (!flush.is_object() || !flush.value("flush_timed_out", false)) return out;
  for (const auto& d : flush.value("dirs", json::array()))
    if (d.is_object() && !d.value("profiler_info", true)) out.push_back(d.value("name", ""));
  return out;
}

std::string BaseName(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

json TaskResultData(const TaskInfo* t) {
  if (!t || t->status != TaskStatus::kSucceeded || !t->result.is_object()) return nullptr;
  return t->result.value("result", json(nullptr));
}

void ScheduleProfileListing(Decision& d, const std::string& root, int64_t analyse_timeout_s) {
  tasks::TorchProfileListProfileDirs p;
  p.set_profile_root(root);
  p.set_analyse_timeout_s(analyse_timeout_s);
  d.Schedule(p);
}

bool ScheduleRankAnalyses(Decision& d, const results::TorchProfileListProfileDirsResult& listed,
                          int64_t analyse_timeout_s) {
  if (listed.dirs().empty()) return false;
  for (const std::string& dir : listed.dirs()) {
    tasks::TorchProfileAnalyseRank p;
    p.set_dir(dir);
    p.set_analyse_timeout_s(analyse_timeout_s);
    d.Schedule(p);
  }
  return true;
}

bool AnalysisDone(const RunState& s) {
  const TaskInfo* list = LastTask(s, kTpListDirsTask);
  if (!list || list->in_flight() || list->status == TaskStatus::kRetryWait) return false;
  for (const TaskInfo* t : TasksInOrder(s, kTpAnalyseRankTask))
    if (t->in_flight() || t->status == TaskStatus::kRetryWait) return false;
  return true;
}

json AnalysisProjection(const RunState& s, int expected_ranks) {
  json out = {{"remote_profile_root", nullptr},
              {"remote_profile_dirs", json::array()},
              {"rank_count", nullptr},
              {"analysis_status", nullptr}};
  const TaskInfo* list = LastTask(s, kTpListDirsTask);
  if (!list) return out;
  out["remote_profile_root"] = PayloadOf<tasks::TorchProfileListProfileDirs>(*list).profile_root();
  const json listed = TaskResultData(list);
  if (listed.is_object()) out["rank_count"] = listed.value("dirs", json::array()).size();
  std::vector<std::string> statuses;
  const std::vector<std::string> unfinalised = UnfinalisedDirs(s);
  for (const TaskInfo* t : TasksInOrder(s, kTpAnalyseRankTask)) {
    const std::string dir = PayloadOf<tasks::TorchProfileAnalyseRank>(*t).dir();
    json rec;
    if (t->status == TaskStatus::kSucceeded) {
      rec = TaskResultData(t);
    } else if (t->status == TaskStatus::kFailed) {
      const json& f = t->result;
      rec = MissingRank(dir, f.value("error_kind", "") + ": " + f.value("error", ""));
    } else if (t->status == TaskStatus::kAbandoned) {
      rec = MissingRank(dir, "analyse abandoned");
      rec["analysis_status"] = "abandoned";
    } else {
      rec = MissingRank(dir, "");
      rec["analysis_status"] = "pending";
      rec.erase("error");
    }
    // A rank torch_npu never finalised holds only part of its data: at best partial.
    if (std::find(unfinalised.begin(), unfinalised.end(), BaseName(dir)) != unfinalised.end()) {
      rec["finalised"] = false;
      if (rec.value("analysis_status", "") == "ok") rec["analysis_status"] = "partial";
      rec["note"] = "torch_npu never finalised this rank (no profiler_info*.json when the flush wait timed out)";
    }
    statuses.push_back(rec.value("analysis_status", "missing_kernel_details"));
    out["remote_profile_dirs"].push_back(std::move(rec));
  }
  if (AnalysisDone(s)) {
    if (list->status != TaskStatus::kSucceeded) {
      out["analysis_status"] = "no_profile_dirs";
    } else {
      out["analysis_status"] = AnalysisGate(statuses, expected_ranks);
    }
  }
  return out;
}

}  // namespace npuprof::sm
