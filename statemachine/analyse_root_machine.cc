#include "statemachine/analyse_root_machine.h"

#include <fmt/format.h>

#include "kind_data.pb.h"
#include "run_specs.pb.h"

#include "statemachine/spec_checks.h"
#include "statemachine/torch_profile_analysis.h"
#include "statemachine/torch_profile_manifest.h"
#include "statemachine/torch_profile_machine.h"
#include "statemachine/torch_profile_spec.h"
#include "statemachine/torch_profile_tasks.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

namespace {

const run_specs::AnalyseRootSpec& Spec(const RunState& s) { return SpecOf<run_specs::AnalyseRootSpec>(s); }

void FinishAnalysis(Decision& d) {
  const int expected = static_cast<int>(Spec(d.state()).expected_ranks());
  const json a = AnalysisProjection(d.state(), expected);
  d.Emit(kTpAnalysisGated, json{{"analysis_status", a["analysis_status"]},
                                {"rank_count", a["rank_count"]},
                                {"expected_ranks", expected},
                                {"remote_profile_root", a["remote_profile_root"]}});
  std::vector<std::string> parts;
  const auto data = DataOf<kind_data::AnalyseRootData>(d.state());
  for (const auto& e : data.errors())
    parts.push_back(fmt::format("{}: {}", e.step(), e.error()));
  const std::string status = a["analysis_status"].is_string() ? a["analysis_status"].get<std::string>() : "";
  if (status == "ok" && parts.empty()) return d.Finish(RunStatus::kOk);
  if (status != "ok") parts.push_back(fmt::format("analysis gate: {}; re-collect required", status));
  d.Finish(RunStatus::kFailed, fmt::format("{}", fmt::join(parts, "; ")));
}

}  // namespace

const TransitionTable& AnalyseRootMachine::transitions() const {
  static const TransitionTable table({{"queued", "analysing"},
                                      {"analysing", "completed"},
                                      {"analysing", "failed"},
                                      {"queued", "failed"},
                                      {"queued", "cancelled"},
                                      {"analysing", "cancelled"}},
                                     {"completed", "failed", "cancelled"});
  return table;
}

Status AnalyseRootMachine::ValidateSpec(json& spec) const {
  if (Status s = RequireSafeName(spec, "machine", true); !s.ok()) return s;
  if (Status s = RequireSafeName(spec, "tag", false); !s.ok()) return s;
  if (!spec.contains("profile_root") || !spec["profile_root"].is_string() || spec["profile_root"].get<std::string>().empty())
    return Status::Invalid("profile_root is required: pass --profile-root <absolute path on the target>");
  std::string root = spec["profile_root"].get<std::string>();
  if (!IsPlainAbsolutePath(root))
    return Status::Invalid("profile_root must be an absolute path on the target without control characters");
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  spec["profile_root"] = root;
  if (!spec.contains("expected_ranks") || spec["expected_ranks"].is_null())
    return Status::Invalid("expected_ranks is required: pass --expected-ranks N (tp * max(dp,1))");
  if (Status s = CheckIntRange(spec, "expected_ranks", 1, 1, 4096); !s.ok()) return s;
  if (Status s = CheckIntRange(spec, "analyse_timeout_s", 1800, 1, 86400); !s.ok()) return s;
  if (Status s = CheckAnalyseParallel(spec); !s.ok()) return s;
  return RequireMachineRecord(spec);
}

void AnalyseRootMachine::OnStart(Decision& d) const {
  d.Transition("analysing");
  ScheduleProfileListing(d, Spec(d.state()).profile_root(), Spec(d.state()).analyse_timeout_s());
}

void AnalyseRootMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  if (task.kind == kTpListDirsTask) {
    const auto& spec = Spec(d.state());
    if (!ScheduleRankAnalyses(d, task, result.As<results::TorchProfileListProfileDirsResult>(),
                              spec.analyse_timeout_s(),
                              spec.has_analyse_parallel() ? std::optional<int64_t>(spec.analyse_parallel())
                                                          : std::nullopt))
      FinishAnalysis(d);
    return;
  }
  if (task.kind == kTpAnalyseRankTask) {
    ContinueRankAnalyses(d, Spec(d.state()).analyse_timeout_s());  // the next rank takes the freed place
    if (AnalysisDone(d.state())) FinishAnalysis(d);
  }
}

void AnalyseRootMachine::OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  d.Emit(kTpStepFailed, json{{"step", task.kind == kTpListDirsTask ? "list_profile_dirs" : "analyse"},
                             {"error_kind", failure.error_kind()},
                             {"error", failure.error()}});
  ContinueRankAnalyses(d, Spec(d.state()).analyse_timeout_s());
  if (AnalysisDone(d.state())) FinishAnalysis(d);
}

void AnalyseRootMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& p) const {
  if (type == kTpStepFailed) {
    if (!s.data.contains("errors")) s.data["errors"] = json::array();
    s.data["errors"].push_back(p);
  } else if (type == kTpAnalysisGated) {
    s.data["analysis_status"] = p.value("analysis_status", json(nullptr));
  } else if (type == kTpAnalyseLimitChosen) {
    ApplyAnalyseLimit(s, p);
  }
}

json AnalyseRootMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  j["analysis_status"] = s.data.value("analysis_status", json(nullptr));
  j["step_errors"] = s.data.value("errors", json::array());
  j["analyse_limits"] = s.data.value("analyse_limits", json::array());
  return j;
}

json AnalyseRootMachine::Manifest(const RunState& s) const { return AnalyseRootManifest(s); }

}  // namespace npuprof::sm
