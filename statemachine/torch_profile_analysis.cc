#include "statemachine/torch_profile_analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/text.h"
#include "task_payloads.pb.h"
#include "statemachine/deployment_service.h"
#include "statemachine/task_payload.h"
#include "statemachine/torch_profile_analyse_limit.h"
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

// The profile listings in node order (the head's first), each node's in
// the order it was scheduled: after a flush that timed out a node's listing
// is scheduled as soon as its own stop confirmed, so the scheduling order
// can be a race between the nodes.
std::vector<const TaskInfo*> ListingsInNodeOrder(const RunState& s) {
  std::vector<const TaskInfo*> out = TasksInOrder(s, kTpListDirsTask);
  std::stable_sort(out.begin(), out.end(),
                   [&](const TaskInfo* a, const TaskInfo* b) { return NodeOfTask(s, *a) < NodeOfTask(s, *b); });
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

}  // namespace

void ScheduleProfileListing(Decision& d, const std::string& root, int64_t analyse_timeout_s,
                            const tasks::Machine* machine, int64_t warm_sessions) {
  tasks::TorchProfileListProfileDirs p;
  p.set_profile_root(root);
  p.set_analyse_timeout_s(analyse_timeout_s);
  if (warm_sessions > 0) p.set_warm_sessions(warm_sessions);
  if (machine && !machine->name().empty()) *p.mutable_machine() = *machine;
  d.Schedule(p);
}

int64_t AnalyseWarmSessions(int64_t ranks, std::optional<int64_t> parallel) {
  int64_t at_once = std::max<int64_t>(ranks, 0);
  if (parallel && *parallel > 0) at_once = std::min(at_once, *parallel);
  return std::min<int64_t>((at_once + 1) / 2, 8);
}

namespace {

void ScheduleAnalyse(Decision& d, const tasks::Machine& where, const std::string& dir, int64_t analyse_timeout_s) {
  tasks::TorchProfileAnalyseRank p;
  p.set_dir(dir);
  p.set_analyse_timeout_s(analyse_timeout_s);
  *p.mutable_machine() = where;  // where the dir was listed
  // torch-profile's --analyse-export-type (absent: analyse()'s own default).
  const json export_type = d.state().spec.value("analyse_export_type", json(nullptr));
  if (export_type.is_string()) p.set_export_type(export_type.get<std::string>());
  d.Schedule(p);
}

AnalyseMeans MeansOf(const results::TorchProfileListProfileDirsResult& listed) {
  AnalyseMeans m;
  const results::AnalyseMeans& r = listed.means();
  if (r.has_cores() && r.cores() >= 1) m.cores = r.cores();
  if (r.has_mem_available_bytes() && r.mem_available_bytes() >= 0) m.mem_available_bytes = r.mem_available_bytes();
  if (r.has_disk_free_bytes() && r.disk_free_bytes() >= 0) m.disk_free_bytes = r.disk_free_bytes();
  for (int64_t b : r.dir_bytes()) m.rank_bytes.push_back(b >= 0 ? std::optional<int64_t>(b) : std::nullopt);
  return m;
}

json OrNull(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// The recorded limit of a listing; nullopt when none was recorded.
std::optional<int64_t> RecordedLimit(const RunState& s, const std::string& listing_task) {
  for (const json& l : s.data.value("analyse_limits", json::array()))
    if (l.is_object() && l.value("listing_task", "") == listing_task && l.contains("limit") &&
        l["limit"].is_number_integer())
      return std::max<int64_t>(1, l["limit"].get<int64_t>());
  return std::nullopt;
}

// The listed dirs of a succeeded listing not yet given an analyse task on its machine.
std::vector<std::string> UnscheduledDirs(const RunState& s, const TaskInfo& listing) {
  std::vector<std::string> out;
  if (listing.status != TaskStatus::kSucceeded) return out;
  const std::string machine = TaskMachine(listing);
  std::set<std::string> scheduled;
  for (const TaskInfo* t : TasksInOrder(s, kTpAnalyseRankTask))
    if (TaskMachine(*t) == machine) scheduled.insert(PayloadOf<tasks::TorchProfileAnalyseRank>(*t).dir());
  const json listed = TaskResultData(&listing);
  for (const json& dir : listed.is_object() ? listed.value("dirs", json::array()) : json::array())
    if (dir.is_string() && !scheduled.count(dir.get<std::string>())) out.push_back(dir.get<std::string>());
  return out;
}

}  // namespace

bool ScheduleRankAnalyses(Decision& d, const TaskInfo& listing, const results::TorchProfileListProfileDirsResult& listed,
                          int64_t analyse_timeout_s, std::optional<int64_t> parallel) {
  if (listed.dirs().empty()) return false;
  const size_t ranks = static_cast<size_t>(listed.dirs_size());
  const AnalyseMeans m = MeansOf(listed);
  const AnalyseLimit chosen = ChooseAnalyseLimit(m, ranks, parallel);
  json ev = {{"listing_task", listing.task_id},
             {"machine", TaskMachine(listing)},
             {"limit", chosen.limit},
             {"reason", chosen.reason},
             {"source", chosen.source},
             {"ranks", ranks},
             {"cores", OrNull(m.cores)},
             {"mem_available_bytes", OrNull(m.mem_available_bytes)},
             {"disk_free_bytes", OrNull(m.disk_free_bytes)},
             {"largest_rank_bytes", OrNull(chosen.largest_rank_bytes)},
             {"total_rank_bytes", OrNull(chosen.total_rank_bytes)}};
  if (!chosen.warning.empty()) ev["warning"] = chosen.warning;
  d.Emit(kTpAnalyseLimitChosen, ev);
  ContinueRankAnalyses(d, analyse_timeout_s);
  return true;
}

void ContinueRankAnalyses(Decision& d, int64_t analyse_timeout_s) {
  if (d.state().terminal || d.state().cancel_requested) return;
  for (const TaskInfo* listing : ListingsInNodeOrder(d.state())) {
    const std::vector<std::string> todo = UnscheduledDirs(d.state(), *listing);
    if (todo.empty()) continue;
    const std::string machine = TaskMachine(*listing);
    const std::optional<int64_t> limit = RecordedLimit(d.state(), listing->task_id);
    int64_t out = 0;
    for (const TaskInfo* t : TasksInOrder(d.state(), kTpAnalyseRankTask))
      if (TaskMachine(*t) == machine && (t->in_flight() || t->status == TaskStatus::kRetryWait)) ++out;
    const tasks::Machine where = PayloadOf<tasks::TorchProfileListProfileDirs>(*listing).machine();
    for (const std::string& dir : todo) {
      if (limit && out >= *limit) break;
      ScheduleAnalyse(d, where, dir, analyse_timeout_s);
      ++out;
    }
  }
}

bool AnalysisDone(const RunState& s) {
  const std::vector<const TaskInfo*> lists = ListingsInNodeOrder(s);
  if (lists.empty()) return false;
  for (const TaskInfo* list : lists) {
    if (list->in_flight() || list->status == TaskStatus::kRetryWait) return false;
    if (!UnscheduledDirs(s, *list).empty()) return false;
  }
  for (const TaskInfo* t : TasksInOrder(s, kTpAnalyseRankTask))
    if (t->in_flight() || t->status == TaskStatus::kRetryWait) return false;
  return true;
}

void ApplyAnalyseLimit(RunState& s, const json& payload) {
  if (!s.data.contains("analyse_limits")) s.data["analyse_limits"] = json::array();
  json& limits = s.data["analyse_limits"];
  limits.push_back(payload);
  // In node order (ListingsInNodeOrder), not the order their answers came
  // in: a recovered run and a clean one list the same.
  std::map<std::string, size_t> order;
  for (const TaskInfo* t : ListingsInNodeOrder(s)) order.emplace(t->task_id, order.size());
  auto rank = [&](const json& l) {
    const std::string id = l.is_object() ? l.value("listing_task", "") : "";
    auto it = order.find(id);
    return it == order.end() ? order.size() : it->second;
  };
  std::vector<json> sorted(limits.begin(), limits.end());
  std::stable_sort(sorted.begin(), sorted.end(), [&](const json& a, const json& b) { return rank(a) < rank(b); });
  limits = json(sorted);
}

json AnalysisProjection(const RunState& s, int expected_ranks) {
  json out = {{"remote_profile_root", nullptr},
              {"remote_profile_dirs", json::array()},
              {"rank_count", nullptr},
              {"analysis_status", nullptr},
              {"analyse_limits", s.data.value("analyse_limits", json::array())}};
  const std::vector<const TaskInfo*> lists = ListingsInNodeOrder(s);
  if (lists.empty()) return out;
  const bool several = lists.size() > 1;
  const TaskInfo* list = lists.front();  // the head's (the only one on one node)
  out["remote_profile_root"] = PayloadOf<tasks::TorchProfileListProfileDirs>(*list).profile_root();
  bool all_listed = true;
  size_t ranks = 0;
  bool any_listed = false;
  std::vector<std::string> short_nodes;
  if (several) {
    out["remote_profile_roots"] = json::array();
    out["rank_counts"] = json::array();
  }
  const int per_node = several ? expected_ranks / static_cast<int>(lists.size()) : expected_ranks;
  for (size_t i = 0; i < lists.size(); ++i) {
    const TaskInfo* l = lists[i];
    const json listed = TaskResultData(l);
    const size_t found = listed.is_object() ? listed.value("dirs", json::array()).size() : 0;
    if (listed.is_object()) {
      ranks += found;
      any_listed = true;
    }
    if (l->status != TaskStatus::kSucceeded) all_listed = false;
    if (!several) continue;
    const std::string machine = TaskMachine(*l);
    out["remote_profile_roots"].push_back(
        {{"machine", machine}, {"root", PayloadOf<tasks::TorchProfileListProfileDirs>(*l).profile_root()}});
    out["rank_counts"].push_back({{"machine", machine}, {"expected", per_node}, {"found", found}});
    if (static_cast<int>(found) != per_node)
      short_nodes.push_back(fmt::format("node {} ({}) wrote {} of {} rank directories", i, machine, found, per_node));
  }
  if (any_listed) out["rank_count"] = ranks;
  if (!short_nodes.empty()) out["analysis_detail"] = fmt::format("{}", fmt::join(short_nodes, "; "));
  std::vector<std::string> statuses;
  const std::vector<std::string> unfinalised = UnfinalisedDirs(s);
  // In node order (the listings' order), each node's ranks in the order its
  // listing gave them: the nodes' analyses are scheduled as each node's
  // listing answers, which is a race between the nodes.
  std::vector<const TaskInfo*> analyses = TasksInOrder(s, kTpAnalyseRankTask);
  if (several) {
    std::map<std::string, size_t> node_of;
    for (size_t i = 0; i < lists.size(); ++i) node_of.emplace(TaskMachine(*lists[i]), i);
    const auto index = [&](const TaskInfo* t) {
      const auto it = node_of.find(TaskMachine(*t));
      return it == node_of.end() ? lists.size() : it->second;
    };
    std::stable_sort(analyses.begin(), analyses.end(),
                     [&](const TaskInfo* a, const TaskInfo* b) { return index(a) < index(b); });
  }
  for (const TaskInfo* t : analyses) {
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
    if (std::find(unfinalised.begin(), unfinalised.end(), PathBaseName(dir)) != unfinalised.end()) {
      rec["finalised"] = false;
      if (rec.value("analysis_status", "") == "ok") rec["analysis_status"] = "partial";
      rec["note"] = "torch_npu never finalised this rank (no profiler_info*.json when the flush wait timed out)";
    }
    if (several) rec["machine"] = TaskMachine(*t);
    statuses.push_back(rec.value("analysis_status", "missing_kernel_details"));
    out["remote_profile_dirs"].push_back(std::move(rec));
  }
  if (AnalysisDone(s)) {
    if (!all_listed && (!several || !any_listed)) {
      out["analysis_status"] = "no_profile_dirs";
    } else if (several && !all_listed) {
      out["analysis_status"] = statuses.empty() ? "no_profile_dirs" : "rank_count_mismatch";
    } else {
      out["analysis_status"] = AnalysisGate(statuses, expected_ranks);
    }
  }
  return out;
}

}  // namespace npuprof::sm
