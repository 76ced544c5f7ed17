// VllmLogToJson: the CLI contract of `npuprof inspect vllm-log FILE`
// (declared in vllm_log_parser.h).
#include <string>

#include "common/utf8.h"
#include "parsers/vllm_log_parser.h"

namespace npuprof::parsers {
namespace {

nlohmann::json Opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
nlohmann::json Opt(const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json EvidenceJson(const std::map<std::string, LogEvidence>& evidence) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, ev] : evidence) out[name] = {{"line", ev.line}, {"text", ToValidUtf8(ev.text)}};
  return out;
}

nlohmann::json ProfileJson(const VllmMemoryProfile& p) {
  if (p.empty()) return nullptr;
  return {{"profile_seconds", Opt(p.profile_seconds)},
          {"total_gib", Opt(p.total_gib)},
          {"free_gib", Opt(p.free_gib)},
          {"requested_gib", Opt(p.requested_gib)},
          {"gpu_memory_utilization", Opt(p.gpu_memory_utilization)},
          {"weights_gib", Opt(p.weights_gib)},
          {"consumed_gib", Opt(p.consumed_gib)},
          {"non_torch_gib", Opt(p.non_torch_gib)},
          {"peak_activation_gib", Opt(p.peak_activation_gib)},
          {"graph_gib", Opt(p.graph_gib)},
          {"kv_cache_gib", Opt(p.kv_cache_gib)}};
}

}  // namespace

nlohmann::json VllmLogToJson(const VllmLogSummary& s) {
  nlohmann::json ranks = nlohmann::json::object();
  for (const auto& [prefix, f] : s.ranks) {
    ranks[ToValidUtf8(prefix)] = {{"weights_gib", Opt(f.weights_gib)},
                     {"weights_load_seconds", Opt(f.weights_load_seconds)},
                     {"kv_cache_available_gib", Opt(f.kv_cache_available_gib)},
                     {"graph_capture_gib", Opt(f.graph_capture_gib)},
                     {"graph_capture_count", f.graph_capture_count},
                     {"memory_profile", ProfileJson(f.memory_profile)},
                     {"evidence", EvidenceJson(f.evidence)}};
  }
  nlohmann::json env = nlohmann::json::array();
  for (const auto& e : s.env_errors) env.push_back({{"kind", e.kind}, {"line", e.line}, {"text", ToValidUtf8(e.text)}});
  nlohmann::json readiness = nlohmann::json::array();
  for (const auto& line : s.readiness_lines) readiness.push_back(ToValidUtf8(line));
  nlohmann::json kv_error = nullptr;
  if (s.kv_error_max_seq_len) {
    kv_error = {{"max_seq_len", *s.kv_error_max_seq_len}, {"kv_cache_max_tokens", Opt(s.kv_error_max_kv_tokens)}};
  }
  const std::string hint = EnvErrorHint(s.env_errors);
  return {{"ranks", std::move(ranks)},
          {"ranks_differ", s.ranks_differ},
          {"weights_gib", Opt(s.weights_gib)},
          {"weights_load_seconds", Opt(s.weights_load_seconds)},
          {"kv_cache_available_gib", Opt(s.kv_cache_available_gib)},
          {"kv_cache_tokens", Opt(s.kv_cache_tokens)},
          {"gpu_blocks", Opt(s.gpu_blocks)},
          {"cpu_blocks", Opt(s.cpu_blocks)},
          {"max_concurrency", Opt(s.max_concurrency)},
          {"max_concurrency_tokens_per_request", Opt(s.max_concurrency_tokens_per_request)},
          {"graph_capture_gib", Opt(s.graph_capture_gib)},
          {"graph_capture_count", s.graph_capture_count},
          {"graph_capture_secs", Opt(s.graph_capture_secs)},
          {"compile_warmup_seconds", Opt(s.compile_warmup_seconds)},
          {"torch_compile_seconds", Opt(s.torch_compile_seconds)},
          {"init_engine_seconds", Opt(s.init_engine_seconds)},
          {"encoder_cache_budget_tokens", Opt(s.encoder_cache_budget_tokens)},
          {"encoder_cache_profile_items", Opt(s.encoder_cache_profile_items)},
          {"encoder_cache_profile_modality", s.encoder_cache_profile_modality.empty()
                                                 ? nlohmann::json(nullptr)
                                                 : nlohmann::json(ToValidUtf8(s.encoder_cache_profile_modality))},
          {"graph_sizes_count", Opt(s.graph_sizes_count)},
          {"gpu_memory_utilization", Opt(s.gpu_memory_utilization)},
          {"kv_capacity_error", std::move(kv_error)},
          {"vllm_version", s.vllm_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(ToValidUtf8(s.vllm_version))},
          {"ready", s.ready},
          {"readiness_lines", std::move(readiness)},
          {"env_errors", std::move(env)},
          {"env_error_hint", hint.empty() ? nlohmann::json(nullptr) : nlohmann::json(hint)},
          {"evidence", EvidenceJson(s.evidence)},
          {"line_count", s.line_count}};
}

}  // namespace npuprof::parsers
