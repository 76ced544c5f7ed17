#include "statemachine/torch_profile_gates.h"

#include <algorithm>

#include <fmt/format.h>

namespace npuprof::sm {

json WorkloadGate(const results::TorchProfileRequestsResult& wave, const results::TorchProfileRequestsResult& followup,
                  double threshold) {
  const int64_t total = wave.results_size();
  int64_t ok = 0;
  for (const auto& r : wave.results())
    if (r.ok()) ++ok;
  const bool followup_ok = followup.results_size() > 0 && followup.results(0).ok();
  const double rate = total > 0 ? static_cast<double>(ok) / static_cast<double>(total) : 0.0;
  std::string status = "ok";
  if (!followup_ok) status = "followup_failed";
  else if (total == 0) status = "no_benchmark_requests";
  else if (rate < threshold) status = "benchmark_below_threshold";
  return json{{"status", status},
              {"bench_total", total},
              {"bench_ok", ok},
              {"bench_success_rate", rate},
              {"bench_threshold", threshold},
              {"followup_ok", followup_ok}};
}

std::string RankAnalysisStatus(bool kernel_details_exists, bool trace_view_exists) {
  if (!kernel_details_exists) return "missing_kernel_details";
  if (!trace_view_exists) return "partial";
  return "ok";
}

std::string AnalysisGate(const std::vector<std::string>& rank_statuses, int expected_ranks) {
  if (rank_statuses.empty()) return "no_profile_dirs";
  auto any = [&](const char* s) { return std::find(rank_statuses.begin(), rank_statuses.end(), s) != rank_statuses.end(); };
  if (any("missing_kernel_details")) return "missing_kernel_details";
  if (static_cast<int>(rank_statuses.size()) != expected_ranks) return "rank_count_mismatch";
  for (const auto& s : rank_statuses)
    if (s != "ok") return "partial";
  return "ok";
}

std::string GateError(const std::string& workload_status, const std::string& analysis_status) {
  std::vector<std::string> parts;
  if (workload_status != "ok") parts.push_back("workload gate: " + (workload_status.empty() ? std::string("not reached") : workload_status));
  if (analysis_status != "ok") parts.push_back("analysis gate: " + (analysis_status.empty() ? std::string("not reached") : analysis_status));
  if (parts.empty()) return "";
  return fmt::format("{}; re-collect required", fmt::join(parts, "; "));
}

}  // namespace npuprof::sm
