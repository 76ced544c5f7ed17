// `npuprof advise`: rules over a memory-profile run's typed evidence
// (memory_evidence.h), each a pure function evidence -> findings. A finding
// carries its evidence references, a severity, a one-line explanation, the
// cause, and a concrete change with its predicted effect computed from the
// measured components, plus the `npuprof submit sweep ...` arguments that
// test it (the sweep carries the advice it verifies: cli/advice_verify.h).
// Rules, thresholds and evidence: docs/ADVISE.md. No I/O, no clock.
//
// Document (BuildMemoryAdvice):
//   {"schema_version": 1, "run_id", "status": "ok" | "partial" | "unreadable",
//    "error": "<decode error>" (only when unreadable: the input or its spec),
//    "evidence_errors": [{"document", "path", "message"}] (only when partial:
//      documents that failed to decode; the rules that need them found nothing),
//    "findings": [{"rule", "severity": "critical"|"warning"|"info",
//      "explanation", "cause", "cause_detail": {...},
//      "evidence": [EvidenceRef.ToJson()...],
//      "suggestion": {"flags": {"gpu_memory_utilization": 0.95} |
//                   {"env": {"HCCL_BUFFSIZE": "200"}} | {},
//        "predicted": {"kv_cache_mb", "kv_cache_gib", "kv_tokens", "hccl_mb", ...} | {},
//        "basis": {...}, "note",
//        "alternatives": [{"flags": {"kv_cache_memory": BYTES}, "predicted", "note"}] (when any),
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
// hccl_buffers_large: HCCL_BUFFSIZE is the MB of each buffer HCCL allocates
// per communication domain (HCCL's default when unset: 200). The rule fires
// when the whole buffers the measured HCCL component holds
// (floor(hccl_mb / HCCL_BUFFSIZE) x HCCL_BUFFSIZE) take more than this share
// of the device's HBM; the remedy is HCCL's default (or half, floored to
// kHcclMinBuffsizeMb, when it is already at or below the default).
inline constexpr int64_t kHcclDefaultBuffsizeMb = 200;
inline constexpr int64_t kHcclMinBuffsizeMb = 50;
inline constexpr double kHcclBuffersPctOfHbm = 2.0;

struct AdviceSuggestion {
  json flags = json::object();      // spec field -> value
  json predicted = json::object();  // what the change gives, computed from the measured components
  json basis = json::object();      // the numbers the prediction used
  std::string note;
  std::vector<std::string> sweep_args;  // after `npuprof`; empty: no sweep tests this remedy
  std::string verify_run_id;
  // Other changes with the same effect ({"flags", "predicted", "note"}):
  // kv_cache_low offers the KV cache its utilization buys as vLLM's
  // --kv-cache-memory (spec field kv_cache_memory, bytes).
  json alternatives = json::array();
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
std::vector<AdviceFinding> RuleHcclBuffersLarge(const MemoryEvidence& e);

// The run's HCCL_BUFFSIZE in MB (kHcclDefaultBuffsizeMb when unset, and
// *is_default then true); nullopt when it is not a positive whole number.
std::optional<int64_t> HcclBuffsizeMb(const RunSettings& s, bool* is_default);
// The HCCL_BUFFSIZE the rule suggests for a current one.
int64_t SuggestedHcclBuffsizeMb(int64_t current_mb);

// The id of the sweep that verifies `rule` of `run_id` ("<run>-adv-<short>",
// shortened to fit a sweep id).
std::string AdviceVerifyRunId(const std::string& run_id, const std::string& rule);

// Every rule over the decoded input (MemoryAdviceInput); a document that
// does not decode is listed (status "partial") and the other rules still
// run; an input or spec that does not decode gives status "unreadable".
json BuildMemoryAdvice(const json& advice_input);

}  // namespace npuprof::sm
