// The analyse-and-verify step shared by torch-profile and analyse-root:
// list *_ascend_pt under a root, one analyse task per directory, then the
// analysis gate. Pure helpers over Decision / RunState.
//
// A multi-node torch-profile lists every node's root on that node (one
// listing task per node, sent to its machine) and analyses each rank dir
// where it was written; the gate counts ranks over the whole deployment, and
// a rank_count_mismatch names the node that wrote fewer.
#pragma once

#include <string>

#include "statemachine/decision.h"
#include "statemachine/run_state.h"
#include "statemachine/run_state_queries.h"  // LastTask
#include "task_payloads.pb.h"
#include "task_results.pb.h"

namespace npuprof::sm {

// machine: where the root is (a multi-node run's node); nullptr = the run's machine.
void ScheduleProfileListing(Decision& d, const std::string& root, int64_t analyse_timeout_s,
                            const tasks::Machine* machine = nullptr);
// Called with a list result: schedules one analyse task per directory, on
// the machine the listing ran on (`listing`'s). Returns false when there is
// nothing to analyse.
bool ScheduleRankAnalyses(Decision& d, const TaskInfo& listing, const results::TorchProfileListProfileDirsResult& listed,
                          int64_t analyse_timeout_s);
// True when every listing ended and no analyse task is still outstanding.
bool AnalysisDone(const RunState& s);

// Projection of the analysis part: {remote_profile_root, remote_profile_dirs,
// rank_count, analysis_status (null until done)}. A rank the flush wait saw
// unfinalised when it timed out (data.flush) is at best "partial" and says so
// (finalised: false, note). Several listings (a multi-node run): each dir
// carries its `machine`, `remote_profile_roots` lists {machine, root},
// `rank_counts` {machine, expected, found} per node (expected_ranks split
// evenly), and `analysis_detail` names the nodes that wrote fewer.
json AnalysisProjection(const RunState& s, int expected_ranks);

}  // namespace npuprof::sm
