#include "parsers/weight_attribution.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace npuprof {
namespace {

using nlohmann::json;
using C = WeightCategory;
using S = ShardStrategy;

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

struct CategoryInfo {
  C category;
  const char* key;
  const char* display;
};

// Report order (docs/BEHAVIOUR.md#weights-categories).
constexpr std::array<CategoryInfo, 30> kCategories = {{
    {C::kEmbedding, "embedding", "Embedding"},
    {C::kLmHead, "lm_head", "LM Head"},
    {C::kAttnQ, "attn_q", "Attention Q"},
    {C::kAttnK, "attn_k", "Attention K"},
    {C::kAttnV, "attn_v", "Attention V"},
    {C::kAttnO, "attn_o", "Attention O"},
    {C::kAttnQkv, "attn_qkv", "Attention QKV (fused)"},
    {C::kAttnConv, "attn_conv", "Attention Conv"},
    {C::kAttnKvCompress, "attn_kv_compress", "Attention KV Compress"},
    {C::kAttnOther, "attn_other", "Attention Other"},
    {C::kLinearAttnQkv, "linear_attn_qkv", "Linear Attn QKV"},
    {C::kLinearAttnProj, "linear_attn_proj", "Linear Attn Proj (Z/O)"},
    {C::kLinearAttnConv, "linear_attn_conv", "Linear Attn Conv1d"},
    {C::kLinearAttnParam, "linear_attn_param", "Linear Attn Param"},
    {C::kFfn, "ffn", "FFN (Dense)"},
    {C::kMoeExpert, "moe_expert", "MoE Experts"},
    {C::kMoeSharedExpert, "moe_shared_expert", "MoE Shared Expert"},
    {C::kMoeGate, "moe_gate", "MoE Router Gate"},
    {C::kMoeOther, "moe_other", "MoE Other"},
    {C::kNorm, "norm", "LayerNorm / RMSNorm"},
    {C::kVision, "vision", "Vision Encoder"},
    {C::kMtpExpert, "mtp_expert", "MTP Experts"},
    {C::kMtpSharedExpert, "mtp_shared_expert", "MTP Shared Expert"},
    {C::kMtpGate, "mtp_gate", "MTP Router Gate"},
    {C::kMtpAttn, "mtp_attn", "MTP Attention"},
    {C::kMtpFc, "mtp_fc", "MTP FC Proj"},
    {C::kMtpNorm, "mtp_norm", "MTP Norm"},
    {C::kMtpOther, "mtp_other", "MTP Other"},
    {C::kQuantParam, "quant_param", "Quant Scales/ZP"},
    {C::kOther, "other", "Other"},
}};

const CategoryInfo& Info(C c) {
  for (const CategoryInfo& i : kCategories) {
    if (i.category == c) return i;
  }
  return kCategories.back();
}

size_t ReportIndex(C c) {
  for (size_t i = 0; i < kCategories.size(); ++i) {
    if (kCategories[i].category == c) return i;
  }
  return kCategories.size();
}

// A lower-cased tensor name and its dot-separated segments.
class Name {
 public:
  explicit Name(std::string_view raw) : text_(raw) {
    for (char& ch : text_) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    size_t start = 0;
    while (start <= text_.size()) {
      size_t dot = text_.find('.', start);
      if (dot == std::string::npos) dot = text_.size();
      segments_.push_back(text_.substr(start, dot - start));
      start = dot + 1;
    }
  }
  bool Has(std::string_view s) const { return text_.find(s) != std::string::npos; }
  bool Seg(std::string_view s) const {
    return std::find(segments_.begin(), segments_.end(), s) != segments_.end();
  }
  bool SegStartsWith(std::string_view prefix) const {
    return std::any_of(segments_.begin(), segments_.end(),
                       [&](const std::string& s) { return s.starts_with(prefix); });
  }
  // N of the first "layers.<N>" pair, if any.
  std::optional<long> LayerIndex() const {
    for (size_t i = 0; i + 1 < segments_.size(); ++i) {
      const std::string& next = segments_[i + 1];
      if (segments_[i] == "layers" && !next.empty() && next.size() < 10 &&
          std::all_of(next.begin(), next.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
        return std::stol(next);
      }
    }
    return std::nullopt;
  }

 private:
  std::string text_;
  std::vector<std::string> segments_;
};

bool IsDownProjection(const Name& n) {
  return n.Has("down_proj") || n.Seg("w2") || n.Seg("fc2") || n.Has("dense_4h_to_h") ||
         n.Seg("c_proj") || n.Has("linear_fc2");
}

bool IsVision(const Name& n) {
  return n.SegStartsWith("visual") || n.SegStartsWith("vision") || n.Seg("vit") ||
         n.Has("image_encoder") || n.Seg("multi_modal_projector") || n.Seg("mm_projector");
}

TensorClass ClassifyVision(const Name& n) {
  if (n.Has("norm") || n.Has("patch_embed") || n.Has("pos_embed")) return {C::kVision, S::kReplicated};
  if (n.Has("qkv") || n.Has("q_proj") || n.Has("k_proj") || n.Has("v_proj") || n.Has("gate_proj") ||
      n.Has("up_proj") || n.Has("gate_up") || n.Seg("fc1") || n.Has("linear_fc1")) {
    return {C::kVision, S::kColumnParallel};
  }
  if (IsDownProjection(n) || n.Has("o_proj") || n.Has("out_proj") || n.Has("proj.weight") ||
      n.Has("proj.bias")) {
    return {C::kVision, S::kRowParallel};
  }
  return {C::kVision, S::kColumnParallel};
}

bool IsMtp(const Name& n, int num_hidden_layers) {
  if (n.SegStartsWith("mtp")) return true;
  if (num_hidden_layers <= 0) return false;
  auto layer = n.LayerIndex();
  return layer && *layer >= num_hidden_layers;
}

bool IsAttentionScope(const Name& n) {
  return n.Seg("self_attn") || n.Seg("attention") || n.Seg("attn");
}

TensorClass ClassifyMtp(const Name& n) {
  if (n.Has("shared_expert_gate")) return {C::kMtpGate, S::kReplicated};
  if (n.Has("shared_expert")) {
    return {C::kMtpSharedExpert, IsDownProjection(n) ? S::kRowParallel : S::kColumnParallel};
  }
  if (n.Seg("experts")) return {C::kMtpExpert, S::kExpertParallel};
  if (n.Seg("gate") || n.Seg("router")) return {C::kMtpGate, S::kReplicated};
  if (n.Has("norm")) return {C::kMtpNorm, S::kReplicated};
  if (IsAttentionScope(n)) {
    if (n.Has("o_proj") || n.Has("out_proj")) return {C::kMtpAttn, S::kRowParallel};
    if (n.Has("q_a_proj") || n.Has("kv_a_proj")) return {C::kMtpAttn, S::kReplicated};
    return {C::kMtpAttn, S::kColumnParallel};
  }
  // DeepSeek's eh_proj is a plain (replicated) linear in vLLM; Qwen's mtp.fc is
  // column-parallel.
  if (n.Seg("eh_proj")) return {C::kMtpFc, S::kReplicated};
  if (n.Seg("fc")) return {C::kMtpFc, S::kColumnParallel};
  return {C::kMtpOther, IsDownProjection(n) ? S::kRowParallel : S::kColumnParallel};
}

TensorClass ClassifyLinearAttention(const Name& n) {
  // The gated norm of Qwen3-Next/3.5 linear attention spans one head: replicated.
  if (n.Has("norm") && n.Seg("linear_attn")) return {C::kLinearAttnParam, S::kReplicated};
  if (n.Has("in_proj_qkv") || n.Seg("in_proj")) return {C::kLinearAttnQkv, S::kColumnParallel};
  if (n.Has("out_proj")) return {C::kLinearAttnProj, S::kRowParallel};
  if (n.Has("in_proj_z")) return {C::kLinearAttnProj, S::kColumnParallel};
  if (n.Has("conv")) return {C::kLinearAttnConv, S::kColumnParallel};
  return {C::kLinearAttnParam, S::kColumnParallel};
}

TensorClass ClassifyAttention(const Name& n) {
  if (n.Seg("indexer")) return {C::kAttnOther, S::kReplicated};  // replicated in vLLM
  if (n.Has("norm")) return {C::kNorm, S::kReplicated};          // q_norm, kv_a_layernorm...
  // MLA: the low-rank down projections are replicated, the up projections split.
  if (n.Has("kv_a_proj")) return {C::kAttnKvCompress, S::kReplicated};
  if (n.Has("kv_b_proj")) return {C::kAttnKvCompress, S::kColumnParallel};
  if (n.Has("q_a_proj")) return {C::kAttnQ, S::kReplicated};
  if (n.Has("qkv_proj") || n.Has("query_key_value") || n.Seg("c_attn") || n.Seg("wqkv") ||
      n.Seg("qkv")) {
    return {C::kAttnQkv, S::kColumnParallel};
  }
  if (n.Has("q_proj") || n.Has("q_b_proj") || n.Seg("wq")) return {C::kAttnQ, S::kColumnParallel};
  if (n.Has("k_proj") || n.Seg("wk")) return {C::kAttnK, S::kColumnParallel};
  if (n.Has("v_proj") || n.Seg("wv")) return {C::kAttnV, S::kColumnParallel};
  if (n.Has("o_proj") || n.Has("out_proj") || n.Seg("wo") || n.Seg("dense") || n.Seg("c_proj")) {
    return {C::kAttnO, S::kRowParallel};
  }
  if (n.Has("conv")) return {C::kAttnConv, S::kReplicated};
  return {C::kAttnOther, S::kReplicated};
}

std::optional<TensorClass> ClassifyMlp(const Name& n) {
  bool mlp = n.Seg("mlp") || n.Seg("feed_forward") || n.Seg("ffn");
  bool moe = n.Seg("block_sparse_moe") || n.Seg("moe");
  if (!mlp && !moe) return std::nullopt;
  if (n.Has("shared_expert_gate")) return TensorClass{C::kMoeGate, S::kReplicated};
  if (n.Has("shared_expert")) {
    return TensorClass{C::kMoeSharedExpert, IsDownProjection(n) ? S::kRowParallel : S::kColumnParallel};
  }
  if (n.SegStartsWith("expert")) return TensorClass{C::kMoeExpert, S::kExpertParallel};
  if (n.Seg("gate") || n.Seg("router") || n.Has("e_score_correction_bias")) {
    return TensorClass{C::kMoeGate, S::kReplicated};
  }
  if (mlp) return TensorClass{C::kFfn, IsDownProjection(n) ? S::kRowParallel : S::kColumnParallel};
  return TensorClass{C::kMoeOther, S::kReplicated};
}

uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

uint64_t Divisor(S s, const ParallelConfig& c) {
  switch (s) {
    case S::kColumnParallel:
    case S::kRowParallel: return static_cast<uint64_t>(c.tp);
    case S::kExpertParallel: return static_cast<uint64_t>(ExpertParallelSize(c));
    case S::kReplicated: return 1;
  }
  return 1;
}

double Gib(uint64_t bytes) { return static_cast<double>(bytes) / kBytesPerGiB; }

}  // namespace

const char* WeightCategoryKey(WeightCategory c) { return Info(c).key; }
const char* WeightCategoryDisplayName(WeightCategory c) { return Info(c).display; }

const char* ShardStrategyName(ShardStrategy s) {
  switch (s) {
    case S::kColumnParallel: return "col_parallel";
    case S::kRowParallel: return "row_parallel";
    case S::kExpertParallel: return "expert_parallel";
    case S::kReplicated: return "replicated";
  }
  return "replicated";
}

TensorClass ClassifyTensor(std::string_view tensor_name, int num_hidden_layers) {
  Name n(tensor_name);
  if (IsVision(n)) return ClassifyVision(n);
  if (IsMtp(n, num_hidden_layers)) return ClassifyMtp(n);
  if (n.Has("embed_tokens") || n.Seg("wte") || n.Seg("word_embeddings") || n.Seg("tok_embeddings")) {
    return {C::kEmbedding, S::kColumnParallel};  // vocab-parallel
  }
  if (n.Has("lm_head")) return {C::kLmHead, S::kColumnParallel};
  if (n.Seg("linear_attn") || n.Seg("mamba")) return ClassifyLinearAttention(n);
  if (IsAttentionScope(n)) return ClassifyAttention(n);
  if (auto mlp = ClassifyMlp(n)) return *mlp;
  if (n.Has("norm") || n.SegStartsWith("ln_")) return {C::kNorm, S::kReplicated};
  if (n.Has("scale") || n.Has("zero_point") || n.Has("qzeros") || n.Has("quant_") || n.Has("g_idx")) {
    return {C::kQuantParam, S::kReplicated};
  }
  return {C::kOther, S::kReplicated};
}

std::vector<WeightTensor> WeightTensorsFromHeader(const SafetensorsHeader& header,
                                                  std::string_view file) {
  std::vector<WeightTensor> out;
  out.reserve(header.tensors.size());
  for (const SafetensorsTensor& t : header.tensors) {
    out.push_back(WeightTensor{std::string(file), t.name, t.dtype, t.shape, t.bytes});
  }
  return out;
}

int ExpertParallelSize(const ParallelConfig& config) {
  return config.expert_parallel ? config.tp * std::max(config.dp, 1) : config.tp;
}

Result<WeightAttribution> AttributeWeights(const std::vector<WeightTensor>& tensors,
                                           const ParallelConfig& config) {
  if (config.tp < 1) return Status::Invalid(fmt::format("tp must be >= 1, got {}", config.tp));
  if (config.dp < 1) return Status::Invalid(fmt::format("dp must be >= 1, got {}", config.dp));

  WeightAttribution out;
  out.config = config;
  out.ep = ExpertParallelSize(config);
  std::map<size_t, CategoryTotal> by_order;
  for (const WeightTensor& t : tensors) {
    AttributedTensor a;
    a.tensor = t;
    a.cls = ClassifyTensor(t.name, config.num_hidden_layers);
    a.divisor = Divisor(a.cls.strategy, config);
    a.per_device_bytes = CeilDiv(t.bytes, a.divisor);

    CategoryTotal& total = by_order[ReportIndex(a.cls.category)];
    total.category = a.cls.category;
    total.tensor_count += 1;
    total.bytes += t.bytes;
    total.per_device_bytes += a.per_device_bytes;
    total.dtypes.insert(t.dtype);
    total.strategies.insert(ShardStrategyName(a.cls.strategy));

    out.total_bytes += t.bytes;
    out.per_device_bytes += a.per_device_bytes;
    out.tensors.push_back(std::move(a));
  }
  for (auto& [order, total] : by_order) out.categories.push_back(std::move(total));
  return out;
}

nlohmann::json WeightManifestJson(const WeightAttribution& a) {
  json categories = json::array();
  for (const CategoryTotal& c : a.categories) {
    categories.push_back({
        {"category", WeightCategoryKey(c.category)},
        {"display_name", WeightCategoryDisplayName(c.category)},
        {"tensor_count", c.tensor_count},
        {"total_bytes", c.bytes},
        {"total_gib", Gib(c.bytes)},
        {"per_device_bytes", c.per_device_bytes},
        {"per_device_gib", Gib(c.per_device_bytes)},
        {"share_of_per_device", a.per_device_bytes ? static_cast<double>(c.per_device_bytes) /
                                                         static_cast<double>(a.per_device_bytes)
                                                   : 0.0},
        {"share_of_total", a.total_bytes ? static_cast<double>(c.bytes) /
                                               static_cast<double>(a.total_bytes)
                                         : 0.0},
        {"dtypes", c.dtypes},
        {"shard_strategies", c.strategies},
    });
  }
  json tensors = json::array();
  for (const AttributedTensor& t : a.tensors) {
    uint64_t numel = 1;
    for (uint64_t d : t.tensor.shape) numel *= d;
    tensors.push_back({
        {"name", t.tensor.name},
        {"source_file", t.tensor.file},
        {"dtype", t.tensor.dtype},
        {"shape", t.tensor.shape},
        {"numel", numel},
        {"byte_size", t.tensor.bytes},
        {"category", WeightCategoryKey(t.cls.category)},
        {"shard_strategy", ShardStrategyName(t.cls.strategy)},
        {"divisor", t.divisor},
        {"per_device_bytes", t.per_device_bytes},
    });
  }
  std::set<std::string> files;
  for (const AttributedTensor& t : a.tensors) files.insert(t.tensor.file);
  return json{
      {"source", "safetensors_headers"},
      {"rule_based_inference", a.rule_based_inference},
      {"note",
       "Byte sizes are exact (safetensors data_offsets). Categories and shard strategies are a "
       "rule-based inference from tensor names, not a measurement."},
      {"tp", a.config.tp},
      {"dp", a.config.dp},
      {"expert_parallel", a.config.expert_parallel},
      {"ep", a.ep},
      {"num_safetensors_files", files.size()},
      {"total_tensors", a.tensors.size()},
      {"total_bytes", a.total_bytes},
      {"total_gib", Gib(a.total_bytes)},
      {"per_device_bytes", a.per_device_bytes},
      {"per_device_gib", Gib(a.per_device_bytes)},
      {"per_device_rounding",
       "per tensor ceil(bytes / divisor): the largest shard when a split is uneven"},
      {"categories", std::move(categories)},
      {"tensors", std::move(tensors)},
  };
}

// ---- config.json theory ---------------------------------------------------

namespace {

// Reads numeric fields from text_config first, then the top level.
class ConfigView {
 public:
  explicit ConfigView(const json& config) : top_(config) {
    auto tc = config.find("text_config");
    text_ = (tc != config.end() && tc->is_object()) ? &*tc : &config;
  }
  uint64_t U(std::string_view key, uint64_t fallback = 0) const {
    for (const json* j : {text_, &top_}) {
      auto it = j->find(std::string(key));
      if (it != j->end() && it->is_number() && !it->is_boolean()) {
        double v = it->get<double>();
        return v > 0 && v < 1e18 ? static_cast<uint64_t>(v) : fallback;
      }
    }
    return fallback;
  }
  bool B(std::string_view key, bool fallback) const {
    for (const json* j : {text_, &top_}) {
      auto it = j->find(std::string(key));
      if (it != j->end() && it->is_boolean()) return it->get<bool>();
    }
    return fallback;
  }
  std::string Str(std::string_view key) const {
    for (const json* j : {text_, &top_}) {
      auto it = j->find(std::string(key));
      if (it != j->end() && it->is_string()) return it->get<std::string>();
    }
    return "";
  }
  const json* Find(std::string_view key) const {
    for (const json* j : {text_, &top_}) {
      auto it = j->find(std::string(key));
      if (it != j->end()) return &*it;
    }
    return nullptr;
  }

 private:
  const json& top_;
  const json* text_;
};

uint64_t DtypeBytes(const std::string& dtype) {
  if (dtype == "float32" || dtype == "float") return 4;
  if (dtype.starts_with("float8") || dtype == "int8" || dtype == "uint8") return 1;
  return 2;  // bfloat16, float16, half and unknown
}

}  // namespace

Result<WeightTheory> EstimateWeightsFromConfig(const nlohmann::json& config,
                                               const ParallelConfig& parallel) {
  if (!config.is_object()) return Status::Invalid("config.json is not a JSON object");
  if (parallel.tp < 1 || parallel.dp < 1) return Status::Invalid("tp and dp must be >= 1");
  ConfigView c(config);
  const uint64_t H = c.U("hidden_size");
  const uint64_t L = c.U("num_hidden_layers");
  const uint64_t V = c.U("vocab_size");
  for (auto [key, value] : {std::pair{"hidden_size", H}, {"num_hidden_layers", L}, {"vocab_size", V}}) {
    if (value == 0) return Status::Invalid(fmt::format("config.json has no positive '{}'", key));
  }
  WeightTheory t;
  t.dtype = c.Str("torch_dtype");
  if (t.dtype.empty()) t.dtype = c.Str("dtype");
  if (t.dtype.empty()) {
    t.dtype = "bfloat16";
    t.notes.push_back("no torch_dtype/dtype: assumed bfloat16");
  }
  t.bytes_per_param = DtypeBytes(t.dtype);
  if (c.Find("quantization_config")) {
    t.notes.push_back("quantization_config present: real weights are quantized; theory counts every "
                      "parameter at torch_dtype size");
  }

  const uint64_t heads = c.U("num_attention_heads");
  const uint64_t kv_heads = c.U("num_key_value_heads", heads);
  const uint64_t head_dim = c.U("head_dim", heads ? H / heads : 0);
  const uint64_t inter = c.U("intermediate_size");
  const uint64_t moe_inter = c.U("moe_intermediate_size");
  uint64_t experts = c.U("n_routed_experts");
  if (!experts) experts = c.U("num_experts");
  if (!experts) experts = c.U("num_local_experts");
  const uint64_t first_dense = c.U("first_k_dense_replace");
  // Shared experts: DeepSeek counts them (n_shared_experts x moe_intermediate_size),
  // Qwen gives one shared expert's width (shared_expert_intermediate_size).
  uint64_t shared_width = c.U("n_shared_experts") * moe_inter;
  if (!shared_width) shared_width = c.U("shared_expert_intermediate_size");

  const uint64_t kv_lora = c.U("kv_lora_rank");
  const uint64_t q_lora = c.U("q_lora_rank");
  const uint64_t nope = c.U("qk_nope_head_dim");
  const uint64_t rope = c.U("qk_rope_head_dim");
  const uint64_t v_dim = c.U("v_head_dim", head_dim);

  uint64_t full_attn_per_layer = 0;
  if (kv_lora) {  // MLA
    uint64_t q_head = nope + rope;
    uint64_t q = q_lora ? H * q_lora + q_lora + q_lora * heads * q_head : H * heads * q_head;
    full_attn_per_layer = q + H * (kv_lora + rope) + kv_lora + kv_lora * heads * (nope + v_dim) +
                          heads * v_dim * H;
  } else {
    full_attn_per_layer = 2 * H * heads * head_dim + 2 * H * kv_heads * head_dim;
  }

  const uint64_t lk_heads = c.U("linear_num_key_heads");
  const uint64_t lk_dim = c.U("linear_key_head_dim");
  const uint64_t lv_heads = c.U("linear_num_value_heads", lk_heads);
  const uint64_t lv_dim = c.U("linear_value_head_dim", lk_dim);
  const uint64_t conv_kernel = c.U("linear_conv_kernel_dim", 4);
  const uint64_t qkv_width = 2 * lk_heads * lk_dim + lv_heads * lv_dim;
  const uint64_t linear_attn_per_layer = H * qkv_width + 2 * H * lv_heads * lv_dim + 2 * H * lv_heads +
                                         qkv_width * conv_kernel + 2 * lv_heads + lv_dim;

  uint64_t linear_layers = 0;
  if (const json* types = c.Find("layer_types"); types && types->is_array()) {
    for (const json& ty : *types) {
      if (ty.is_string() && ty.get<std::string>() == "linear_attention") ++linear_layers;
    }
    if (linear_layers && !(lk_heads && lk_dim)) {
      t.notes.push_back("layer_types has linear_attention but linear_* head sizes are missing: "
                        "counted those layers as full attention");
      linear_layers = 0;
    }
  }
  linear_layers = std::min(linear_layers, L);
  const uint64_t moe_layers = experts ? (L > first_dense ? L - first_dense : 0) : 0;
  const uint64_t dense_layers = L - moe_layers;

  auto add = [&](std::string name, uint64_t params, S strategy) {
    if (params == 0) return;
    TheoryComponent comp{std::move(name), params, params * t.bytes_per_param, strategy, 0};
    comp.per_device_bytes = CeilDiv(comp.bytes, Divisor(strategy, parallel));
    t.total_params += comp.params;
    t.total_bytes += comp.bytes;
    t.per_device_bytes += comp.per_device_bytes;
    t.components.push_back(std::move(comp));
  };

  const bool tied = c.B("tie_word_embeddings", false);
  add("embedding", V * H, S::kColumnParallel);
  add("lm_head", tied ? 0 : V * H, S::kColumnParallel);
  add("attention", (L - linear_layers) * full_attn_per_layer, S::kColumnParallel);
  add("linear_attention", linear_layers * linear_attn_per_layer, S::kColumnParallel);
  add("dense_mlp", dense_layers * 3 * H * inter, S::kColumnParallel);
  add("moe_experts", moe_layers * experts * 3 * H * moe_inter, S::kExpertParallel);
  add("moe_shared_experts", moe_layers * 3 * H * shared_width, S::kColumnParallel);
  add("moe_router", moe_layers * experts * H, S::kReplicated);
  add("norms", 2 * H * L + H, S::kReplicated);

  uint64_t mtp_layers = c.U("num_nextn_predict_layers");
  if (!mtp_layers) mtp_layers = c.U("mtp_num_hidden_layers");
  if (mtp_layers) {
    // One decoder layer (MoE when the model is MoE) + fc(2H -> H) + norms each;
    // MTP shares embeddings and lm_head with the base model.
    add("mtp_experts", experts ? mtp_layers * experts * 3 * H * moe_inter : 0, S::kExpertParallel);
    uint64_t mlp = experts ? 3 * H * shared_width + experts * H : 3 * H * inter;
    add("mtp_other", mtp_layers * (full_attn_per_layer + mlp + 2 * H * H + 4 * H), S::kColumnParallel);
    t.notes.push_back("MTP layers counted without their own embedding/lm_head (shared with the base "
                      "model; some checkpoints store copies)");
  }

  if (const json* vc = c.Find("vision_config"); vc && vc->is_object()) {
    ConfigView v(*vc);
    uint64_t vh = v.U("hidden_size", v.U("embed_dim"));
    uint64_t depth = v.U("depth", v.U("num_hidden_layers"));
    uint64_t vi = v.U("intermediate_size", 4 * vh);
    uint64_t patch = v.U("patch_size", 14);
    uint64_t channels = v.U("in_channels", v.U("in_chans", 3));
    uint64_t temporal = v.U("temporal_patch_size", 1);
    if (vh && depth) {
      add("vision_encoder",
          channels * temporal * patch * patch * vh + depth * (4 * vh * vh + 2 * vh * vi + 4 * vh),
          S::kColumnParallel);
      t.notes.push_back("vision encoder is a rough estimate (blocks + patch embedding; merger, "
                        "position embeddings and biases not counted)");
    }
  }
  t.notes.push_back("biases, q/k norms and rotary buffers are not counted");
  return t;
}

nlohmann::json WeightTheoryJson(const WeightTheory& t) {
  json components = json::array();
  for (const TheoryComponent& comp : t.components) {
    components.push_back({{"name", comp.name},
                          {"params", comp.params},
                          {"bytes", comp.bytes},
                          {"gib", Gib(comp.bytes)},
                          {"shard_strategy", ShardStrategyName(comp.strategy)},
                          {"per_device_bytes", comp.per_device_bytes}});
  }
  return json{{"label", t.label},
              {"source", "config.json"},
              {"dtype", t.dtype},
              {"bytes_per_param", t.bytes_per_param},
              {"total_params", t.total_params},
              {"total_bytes", t.total_bytes},
              {"total_gib", Gib(t.total_bytes)},
              {"per_device_bytes", t.per_device_bytes},
              {"per_device_gib", Gib(t.per_device_bytes)},
              {"components", std::move(components)},
              {"notes", t.notes}};
}

}  // namespace npuprof
