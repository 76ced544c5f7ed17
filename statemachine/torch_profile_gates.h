// The two hard gates of a torch-profile collection (docs/BEHAVIOUR.md#tp-workload-gate,
// #tp-analysis-gate), the per-rank verdict (#tp-rank-status), and the run verdict
// (#tp-verdict). Pure functions.
#pragma once

#include <string>
#include <vector>

#include "statemachine/run_state.h"
#include "task_results.pb.h"

namespace npuprof::sm {

// Workload gate, checked in this order: "followup_failed" when the follow-up
// failed; "no_benchmark_requests" when the wave was empty;
// "benchmark_below_threshold" when ok/total < threshold; else "ok".
// `wave` and `followup` are the two request tasks' results as their
// messages (task_result.h): every request of the wave counts, ok when it got
// a 2xx answer; the follow-up passes when its first request did (none sent =
// failed).
// Returns {status, bench_total, bench_ok, bench_success_rate, bench_threshold, followup_ok}.
json WorkloadGate(const results::TorchProfileRequestsResult& wave, const results::TorchProfileRequestsResult& followup,
                  double threshold);

// Per-rank verdict: "missing_kernel_details" when the CSV is missing, else
// "partial" when trace_view.json is missing, else "ok".
std::string RankAnalysisStatus(bool kernel_details_exists, bool trace_view_exists);

// Analysis gate, worst first: "no_profile_dirs" (none found),
// "missing_kernel_details" (any rank), "rank_count_mismatch" (found !=
// expected), "partial" (any rank), else "ok". `rank_statuses` holds one
// verdict per directory found.
std::string AnalysisGate(const std::vector<std::string>& rank_statuses, int expected_ranks);

// The run's error when a gate tripped ("" when both are ok), e.g.
// "workload gate: benchmark_below_threshold; analysis gate: partial; re-collect required".
std::string GateError(const std::string& workload_status, const std::string& analysis_status);

}  // namespace npuprof::sm
