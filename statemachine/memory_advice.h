// `npuprof advise`: rules over a memory-profile run's typed evidence
// (memory_evidence.h), each a pure function evidence -> findings. A finding
// carries its evidence references, a severity, a one-line explanation, the
// cause, and a concrete change with its predicted effect computed from the
// measured components, plus the `npuprof submit sweep ...` arguments that
// test it (the sweep carries the advice it verifies: cli/advice_verify.h).
// Rules, thresholds and evidence: docs/ADVISE.md. No I/O, no clock.
//
// Document (BuildMemoryAdvice):
//   {"schema_version": 1, "run_id", "status": "ok" | "unreadable",
//    "error": "<decode error>" (only when unreadable),
//    "findings": [{"rule", "severity": "critical"|"warning"|"info",
//      "explanation", "cause", "cause_detail": {...},
//      "evidence": [EvidenceRef.ToJson()...],
//      "suggestion": {"flags": {"gpu_memory_utilization": 0.95} | {},
//        "predicted": {"kv_cache_mb", "kv_cache_gib", "kv_tokens", ...} | {},
//        "basis": {...}, "note",
//        "sweep_args": ["submit","sweep",...] | null,
//        "verify_run_id": "<sweep id>" | null}}]}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "statemachine/memory_evidence.h"

namespace npuprof::sm {

// Thresholds (docs/ADVISE.md).
inline constexpr double kKvLowGib = 1.0;             // KV cache below this (or negative) fires kv_cache_low
inline constexpr double kBaselineUnlistedMb = 4096;  // baseline HBM with no process listed: another container
inline constexpr double kGraphAllowanceMb = 1024;    // graph capture not measured (vLLM stopped before it)
inline constexpr double kSafetyHeadroomMb = 1024;    // kept free at the inference peak by the safe utilization
inline constexpr double kMaxSafeUtilization = 0.95;
inline constexpr double kMinHeadroomMb = 512;        // activation_headroom: at least this much free at the peak
inline constexpr double kWeightsOffPct = 2.0;        // weights_vs_safetensors
inline constexpr double kResidualMb = 200;           // residual_large (with msprof)
inline constexpr int64_t kKvBlockSize = 128;         // vllm-ascend's KV block size

struct AdviceSuggestion {
  json flags = json::object();      // spec field -> value
  json predicted = json::object();  // what the change gives, computed from the measured components
  json basis = json::object();      // the numbers the prediction used
  std::string note;
  std::vector<std::string> sweep_args;  // after `npuprof`; empty: no sweep tests this remedy
  std::string verify_run_id;
};

struct AdviceFinding {
  std::string rule, severity, explanation, cause;
  json cause_detail = json::object();
  std::vector<EvidenceRef> evidence;
  AdviceSuggestion suggestion;
  json ToJson() const;
};

// KV bytes per token per rank of a model's config (vLLM's formula: K and V
// per full-attention layer, kv heads split over tp; MLA: kv_lora_rank +
// rope dims), nullopt when the config does not give the sizes.
std::optional<int64_t> KvBytesPerToken(const ModelConfigEvidence& config, int64_t tp);
// The KV tokens vLLM makes of `kv_gib` as it prints it (2 decimals): whole
// blocks of kKvBlockSize tokens.
int64_t KvTokensOf(int64_t kv_centi_gib, int64_t bytes_per_token);
// floor(x * 100) / 100 with a tolerance for binary fractions (0.95 stays 0.95).
double FloorCenti(double x);
// The largest gpu-memory-utilization that keeps kSafetyHeadroomMb free at the
// inference peak: vLLM fills total x utilization (KV included), graph capture
// comes on top; capped at kMaxSafeUtilization.
double LargestSafeUtilization(double total_mb, double graph_mb);

// The rules. Each returns no finding when its evidence is missing.
std::vector<AdviceFinding> RuleKvCacheLow(const MemoryEvidence& e);
std::vector<AdviceFinding> RuleActivationHeadroom(const MemoryEvidence& e);
std::vector<AdviceFinding> RuleWeightsVsSafetensors(const MemoryEvidence& e);
std::vector<AdviceFinding> RuleResidualLarge(const MemoryEvidence& e);

// The id of the sweep that verifies `rule` of `run_id` ("<run>-adv-<short>",
// shortened to fit a sweep id).
std::string AdviceVerifyRunId(const std::string& run_id, const std::string& rule);

// Every rule over the decoded input (MemoryAdviceInput); an input that does
// not decode gives status "unreadable" with the error, never a finding.
json BuildMemoryAdvice(const json& advice_input);

}  // namespace npuprof::sm
