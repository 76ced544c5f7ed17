// Weight attribution: which part of the model each safetensors tensor belongs
// to, how it is sharded across devices, and what one device holds.
//
// Byte sizes come exactly from safetensors headers. The category and the shard
// strategy are a RULE-BASED INFERENCE from tensor names (docs/BEHAVIOUR.md#weights-inference), not a measurement; ...
// weight inspector), not a measurement; every output says so.
//
// Shard strategies and their divisors:
//   col_parallel, row_parallel  -> bytes / TP
//   expert_parallel             -> bytes / EP, EP = TP * DP with expert parallel on, else TP
//   replicated                  -> bytes (whole copy on each device)
//
// Rounding: a tensor's per-device bytes are ceil(bytes / divisor), the size of
// the largest shard when the split is uneven (exact when it divides). Category
// and total per-device bytes are sums of these integers, so they add up exactly.
//
// Rules (docs/BEHAVIOUR.md#weights-categories; order: vision, MTP, embedding,
// lm_head, linear attention, self-attention, MLP/MoE, norm, quant, other) with
// names matched on dot-separated segments. Differences from the reference scripts' rules: docs/BEHAVIOUR.md#differences-weights. In short:
//  * MLA: q_a_proj and kv_a_proj_with_mqa are replicated (vLLM loads them as
//    replicated linears); kv_a/kv_b are attn_kv_compress.
//  * norms inside attention (q_norm, k_norm, q_a_layernorm, kv_a_layernorm)
//    are "norm"/replicated.
//  * shared_expert_gate is a router gate (replicated), not a shared expert.
//  * fused qkv (qkv_proj, c_attn, query_key_value) is "attn_qkv".
//  * DeepSeek MTP layers (layers.<N> with N >= num_hidden_layers) are MTP;
//    their eh_proj is replicated.
//  * "mamba" blocks count as linear attention; the linear_attn gated norm is
//    replicated; the attention indexer (DeepSeek V3.2) is replicated.
//
// Pure: no I/O.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "parsers/safetensors_header.h"

namespace npuprof {

// Categories in report order (docs/BEHAVIOUR.md#weights-categories). Keys (WeightCategoryKey):
// "embedding", "lm_head", "attn_q", ... ; kAttnQkv ("attn_qkv", fused q/k/v
// projections) has its own key (docs/BEHAVIOUR.md#differences-weights).
enum class WeightCategory {
  kEmbedding, kLmHead,
  kAttnQ, kAttnK, kAttnV, kAttnO, kAttnQkv, kAttnConv, kAttnKvCompress, kAttnOther,
  kLinearAttnQkv, kLinearAttnProj, kLinearAttnConv, kLinearAttnParam,
  kFfn,
  kMoeExpert, kMoeSharedExpert, kMoeGate, kMoeOther,
  kNorm, kVision,
  kMtpExpert, kMtpSharedExpert, kMtpGate, kMtpAttn, kMtpFc, kMtpNorm, kMtpOther,
  kQuantParam, kOther,
};

enum class ShardStrategy { kColumnParallel, kRowParallel, kExpertParallel, kReplicated };

const char* WeightCategoryKey(WeightCategory c);          // "moe_expert"
const char* WeightCategoryDisplayName(WeightCategory c);  // "MoE Experts"
const char* ShardStrategyName(ShardStrategy s);           // "col_parallel", "row_parallel",
                                                          // "expert_parallel", "replicated"

struct TensorClass {
  WeightCategory category = WeightCategory::kOther;
  ShardStrategy strategy = ShardStrategy::kReplicated;
};

// MTP detection: a name segment starting with "mtp" (Qwen3-Next/3.5 "mtp.*",
// docs/BEHAVIOUR.md#weights-categories), or, when num_hidden_layers > 0, "layers.<N>." with
// N >= num_hidden_layers (DeepSeek V3 stores its MTP module as layer 61 of 61).
// 0 = unknown: only names are used.
TensorClass ClassifyTensor(std::string_view tensor_name, int num_hidden_layers = 0);

struct WeightTensor {
  std::string file;                // safetensors file name the tensor came from
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;              // exact: data_offsets end - begin
};

// The tensors of one parsed header, tagged with `file`.
std::vector<WeightTensor> WeightTensorsFromHeader(const SafetensorsHeader& header,
                                                  std::string_view file);

struct ParallelConfig {
  int tp = 1;
  int dp = 1;
  bool expert_parallel = false;
  int num_hidden_layers = 0;       // from config.json when known; see ClassifyTensor
};

// EP = TP * DP when expert parallel is on, else TP.
int ExpertParallelSize(const ParallelConfig& config);

struct AttributedTensor {
  WeightTensor tensor;
  TensorClass cls;
  uint64_t divisor = 1;
  uint64_t per_device_bytes = 0;   // ceil(bytes / divisor)
};

struct CategoryTotal {
  WeightCategory category = WeightCategory::kOther;
  size_t tensor_count = 0;
  uint64_t bytes = 0;
  uint64_t per_device_bytes = 0;
  std::set<std::string> dtypes;
  std::set<std::string> strategies;  // ShardStrategyName of its tensors
};

struct WeightAttribution {
  ParallelConfig config;
  int ep = 1;
  std::vector<AttributedTensor> tensors;     // input order
  std::vector<CategoryTotal> categories;     // report order, only non-empty ones
  uint64_t total_bytes = 0;
  uint64_t per_device_bytes = 0;
  bool rule_based_inference = true;          // always: categories are inferred from names
};

// Classifies and shards every tensor. Errors: tp < 1 or dp < 1.
Result<WeightAttribution> AttributeWeights(const std::vector<WeightTensor>& tensors,
                                           const ParallelConfig& config);

// The `npuprof inspect safetensors` document (docs/BEHAVIOUR.md#weights-manifest): tensors (field names:
// name, dtype, shape, numel, byte_size, source_file, category, shard_strategy,
// plus divisor and per_device_bytes), per-category totals with GiB and shares,
// total and per-device bytes, and the inference disclaimer.
nlohmann::json WeightManifestJson(const WeightAttribution& attribution);

// ---- config.json theory (reference only) --------------------------------

struct TheoryComponent {
  std::string name;                // "embedding", "attention", "moe_experts", ...
  uint64_t params = 0;
  uint64_t bytes = 0;
  ShardStrategy strategy = ShardStrategy::kReplicated;
  uint64_t per_device_bytes = 0;   // ceil(bytes / divisor), as above
};

struct WeightTheory {
  std::string label = "theory, reference only";
  std::string dtype;               // torch_dtype / dtype as written, "bfloat16" if absent
  uint64_t bytes_per_param = 2;
  std::vector<TheoryComponent> components;
  uint64_t total_params = 0;
  uint64_t total_bytes = 0;
  uint64_t per_device_bytes = 0;
  std::vector<std::string> notes;  // what was assumed or left out
};

// Estimates parameter bytes from a model config.json (or its "text_config"
// when present): embeddings (+ lm_head unless tied), attention per layer (full
// attention, or linear attention for "linear_attention" layer_types), dense or
// MoE MLP (routed experts, shared experts, router), norms, MTP layers
// (num_nextn_predict_layers / mtp_num_hidden_layers) and a rough vision
// encoder. Errors: hidden_size, num_hidden_layers or vocab_size missing.
Result<WeightTheory> EstimateWeightsFromConfig(const nlohmann::json& config,
                                               const ParallelConfig& parallel);

nlohmann::json WeightTheoryJson(const WeightTheory& theory);

}  // namespace npuprof
