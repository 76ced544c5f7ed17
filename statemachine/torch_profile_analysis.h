// The analyse-and-verify step shared by torch-profile and analyse-root:
// list *_ascend_pt under a root, one analyse task per directory (at most N
// out at once per machine, N chosen from the target's means when the listing
// answers: torch_profile_analyse_limit.h), then the analysis gate. Pure
// helpers over Decision / RunState.
//
// A multi-node torch-profile lists every node's root on that node (one
// listing task per node, sent to its machine) and analyses each rank dir
// where it was written; the gate counts ranks over the whole deployment, and
// a rank_count_mismatch names the node that wrote fewer.
#pragma once

#include <optional>
#include <string>

#include "statemachine/decision.h"
#include "statemachine/run_state.h"
#include "statemachine/run_state_queries.h"  // LastTask
#include "task_payloads.pb.h"
#include "task_results.pb.h"

namespace npuprof::sm {

// machine: where the root is (a multi-node run's node); nullptr = the run's machine.
// warm_sessions: the payload's (AnalyseWarmSessions; 0 = none).
void ScheduleProfileListing(Decision& d, const std::string& root, int64_t analyse_timeout_s,
                            const tasks::Machine* machine = nullptr, int64_t warm_sessions = 0);

// How many SSH connections the worker of each of the two tasks right before
// a host's analyses (torch-profile's flush wait and its listing) opens ahead
// for them, off their path (SshPool::WarmUpTo): each analyse task holds a
// connection of its own for its wait, and a cold worker would otherwise open
// one per rank when the analyses are scheduled, a handshake and a login
// shell each on the target's cores, before the rank's analyse() can start.
// The host's ranks (at most `parallel` of them analysed at once when set),
// half per task: the broker gives the analyses to the least-loaded workers
// and the two tasks run on two workers when there are two; at most 8.
// 1 for one rank (the worker's own connection serves it).
int64_t AnalyseWarmSessions(int64_t ranks, std::optional<int64_t> parallel);
// {listing_task, machine, limit, reason, source, ranks, cores, ...}: how
// many analyse tasks may be out at once for one listing's dirs
// (kind_events.AnalyseLimitChosen; the kinds fold it into
// data.analyse_limits).
inline constexpr const char* kTpAnalyseLimitChosen = "AnalyseLimitChosen";

// Called with a list result: chooses how many of its dirs are analysed at
// once (ChooseAnalyseLimit over the result's means, or `parallel` when the
// spec sets it), records it (kTpAnalyseLimitChosen), and schedules that many
// analyse tasks, on the machine the listing ran on (`listing`'s). Returns
// false when there is nothing to analyse.
bool ScheduleRankAnalyses(Decision& d, const TaskInfo& listing, const results::TorchProfileListProfileDirsResult& listed,
                          int64_t analyse_timeout_s, std::optional<int64_t> parallel);
// After an analyse task ended: schedules the next listed dirs not yet given
// a task, keeping each listing's machine at most at its recorded limit (a
// listing without a recorded limit, from a run recorded before limits,
// has had all its dirs scheduled at once).
void ContinueRankAnalyses(Decision& d, int64_t analyse_timeout_s);
// True when every listing ended, every listed dir was given an analyse task
// and none is still outstanding.
bool AnalysisDone(const RunState& s);
// The fold of kTpAnalyseLimitChosen (both kinds): appended to data.analyse_limits.
void ApplyAnalyseLimit(RunState& s, const json& payload);

// Projection of the analysis part: {remote_profile_root, remote_profile_dirs,
// rank_count, analysis_status (null until done), analyse_limits (the
// recorded AnalyseLimitChosen payloads)}. A rank the flush wait saw
// unfinalised when it timed out (data.flush) is at best "partial" and says so
// (finalised: false, note). Several listings (a multi-node run): each dir
// carries its `machine`, `remote_profile_roots` lists {machine, root},
// `rank_counts` {machine, expected, found} per node (expected_ranks split
// evenly), and `analysis_detail` names the nodes that wrote fewer.
json AnalysisProjection(const RunState& s, int expected_ranks);

}  // namespace npuprof::sm
