// ParseVllmLog on any bytes. Promises: it never fails; it counts the lines
// as '\n' separates them; every evidence line exists and quotes a non-empty
// line; every extracted number is finite and every count non-negative; the
// lists copied from the log stay within their bounds; graph captures add up
// over the ranks; the JSON projection serialises (remote bytes may be any
// bytes) and parses back to itself.
#include <algorithm>
#include <cmath>

#include "parsers/vllm_log_parser.h"
#include "tests/fuzz/fuzz_targets.h"

namespace npuprof::fuzz {
namespace {

void CheckEvidence(const std::map<std::string, parsers::LogEvidence>& evidence, int64_t lines) {
  for (const auto& [field, ev] : evidence) {
    FUZZ_CHECK(ev.line >= 1 && ev.line <= lines, "evidence of {} names line {} of {}", field, ev.line,
               lines);
    FUZZ_CHECK(!ev.text.empty(), "evidence of {} quotes an empty line", field);
  }
}

void CheckFinite(const std::optional<double>& v, const char* field) {
  FUZZ_CHECK(!v || std::isfinite(*v), "{} is {}", field, *v);
}

void CheckCount(const std::optional<int64_t>& v, const char* field) {
  FUZZ_CHECK(!v || *v >= 0, "{} is negative: {}", field, *v);
}

void CheckProfile(const parsers::VllmMemoryProfile& p) {
  for (const auto& v : {p.profile_seconds, p.total_gib, p.free_gib, p.requested_gib, p.gpu_memory_utilization,
                        p.weights_gib, p.consumed_gib, p.non_torch_gib, p.peak_activation_gib, p.graph_gib,
                        p.kv_cache_gib}) {
    CheckFinite(v, "a memory_profile field");
  }
}

}  // namespace

int FuzzVllmLog(const uint8_t* data, size_t size) {
  const std::string_view text = AsText(data, size);
  const parsers::VllmLogSummary s = parsers::ParseVllmLog(text);

  const int64_t newlines = std::count(text.begin(), text.end(), '\n');
  const int64_t lines = newlines + (!text.empty() && text.back() != '\n' ? 1 : 0);
  FUZZ_CHECK(s.line_count == lines, "line_count {} for {} lines", s.line_count, lines);
  CheckEvidence(s.evidence, s.line_count);

  CheckFinite(s.weights_gib, "weights_gib");
  CheckFinite(s.weights_load_seconds, "weights_load_seconds");
  CheckFinite(s.kv_cache_available_gib, "kv_cache_available_gib");
  CheckFinite(s.max_concurrency, "max_concurrency");
  CheckFinite(s.graph_capture_gib, "graph_capture_gib");
  CheckFinite(s.graph_capture_secs, "graph_capture_secs");
  CheckFinite(s.compile_warmup_seconds, "compile_warmup_seconds");
  CheckFinite(s.torch_compile_seconds, "torch_compile_seconds");
  CheckFinite(s.init_engine_seconds, "init_engine_seconds");
  CheckFinite(s.gpu_memory_utilization, "gpu_memory_utilization");
  CheckCount(s.kv_cache_tokens, "kv_cache_tokens");
  CheckCount(s.gpu_blocks, "gpu_blocks");
  CheckCount(s.cpu_blocks, "cpu_blocks");
  CheckCount(s.max_concurrency_tokens_per_request, "max_concurrency_tokens_per_request");
  CheckCount(s.encoder_cache_budget_tokens, "encoder_cache_budget_tokens");
  CheckCount(s.encoder_cache_profile_items, "encoder_cache_profile_items");
  CheckCount(s.graph_sizes_count, "graph_sizes_count");
  CheckCount(s.kv_error_max_seq_len, "kv_error_max_seq_len");
  CheckCount(s.kv_error_max_kv_tokens, "kv_error_max_kv_tokens");

  FUZZ_CHECK(s.env_errors.size() <= 100, "{} env errors kept", s.env_errors.size());
  FUZZ_CHECK(s.readiness_lines.size() <= 50, "{} readiness lines kept", s.readiness_lines.size());
  for (const auto& e : s.env_errors) {
    FUZZ_CHECK(e.line >= 1 && e.line <= s.line_count, "env error at line {} of {}", e.line, s.line_count);
  }
  FUZZ_CHECK(!s.ranks_differ || s.ranks.size() >= 2, "ranks differ with {} rank(s)", s.ranks.size());

  int rank_captures = 0;
  for (const auto& [prefix, f] : s.ranks) {
    CheckFinite(f.weights_gib, "rank weights_gib");
    CheckFinite(f.weights_load_seconds, "rank weights_load_seconds");
    CheckFinite(f.kv_cache_available_gib, "rank kv_cache_available_gib");
    CheckFinite(f.graph_capture_gib, "rank graph_capture_gib");
    CheckProfile(f.memory_profile);
    CheckEvidence(f.evidence, s.line_count);
    rank_captures += f.graph_capture_count;
  }
  FUZZ_CHECK(rank_captures == s.graph_capture_count, "ranks captured {} graphs, the run {}", rank_captures,
             s.graph_capture_count);

  CheckJson(parsers::VllmLogToJson(s), "VllmLogToJson");
  return 0;
}

}  // namespace npuprof::fuzz
