// The analyse-and-verify step shared by torch-profile and analyse-root:
// list *_ascend_pt under a root, one analyse task per directory, then the
// analysis gate. Pure helpers over Decision / RunState.
#pragma once

#include <string>

#include "statemachine/decision.h"
#include "statemachine/run_state.h"
#include "statemachine/run_state_queries.h"  // LastTask
#include "task_results.pb.h"

namespace npuprof::sm {

// The handler result of a succeeded task (null otherwise).
json TaskResultData(const TaskInfo* t);

void ScheduleProfileListing(Decision& d, const std::string& root, int64_t analyse_timeout_s);
// Called with a list result: schedules one analyse task per directory.
// Returns false when there is nothing to analyse (gate can be computed now).
bool ScheduleRankAnalyses(Decision& d, const results::TorchProfileListProfileDirsResult& listed,
                          int64_t analyse_timeout_s);
// True when the listing ended and no analyse task is still outstanding.
bool AnalysisDone(const RunState& s);

// Projection of the analysis part: {remote_profile_root, remote_profile_dirs,
// rank_count, analysis_status (null until done)}. A rank the flush wait saw
// unfinalised when it timed out (data.flush) is at best "partial" and says so
// (finalised: false, note).
json AnalysisProjection(const RunState& s, int expected_ranks);

}  // namespace npuprof::sm
