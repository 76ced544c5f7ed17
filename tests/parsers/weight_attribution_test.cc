#include "parsers/weight_attribution.h"

#include <string>

#include <gtest/gtest.h>

namespace npuprof {
namespace {

using C = WeightCategory;
using S = ShardStrategy;

struct Row {
  const char* name;
  C category;
  S strategy;
  int num_hidden_layers = 0;
};

void ExpectTable(const std::vector<Row>& rows) {
  for (const Row& r : rows) {
    TensorClass got = ClassifyTensor(r.name, r.num_hidden_layers);
    EXPECT_EQ(WeightCategoryKey(got.category), std::string(WeightCategoryKey(r.category))) << r.name;
    EXPECT_EQ(ShardStrategyName(got.strategy), std::string(ShardStrategyName(r.strategy))) << r.name;
  }
}

TEST(ClassifyTensor, DenseQwenLlamaNames) {
  ExpectTable({
      {"model.embed_tokens.weight", C::kEmbedding, S::kColumnParallel},
      {"lm_head.weight", C::kLmHead, S::kColumnParallel},
      {"model.layers.0.self_attn.q_proj.weight", C::kAttnQ, S::kColumnParallel},
      {"model.layers.0.self_attn.q_proj.bias", C::kAttnQ, S::kColumnParallel},
      {"model.layers.0.self_attn.k_proj.weight", C::kAttnK, S::kColumnParallel},
      {"model.layers.0.self_attn.v_proj.weight", C::kAttnV, S::kColumnParallel},
      {"model.layers.0.self_attn.o_proj.weight", C::kAttnO, S::kRowParallel},
      {"model.layers.0.self_attn.q_norm.weight", C::kNorm, S::kReplicated},
      {"model.layers.0.self_attn.k_norm.weight", C::kNorm, S::kReplicated},
      {"model.layers.0.mlp.gate_proj.weight", C::kFfn, S::kColumnParallel},
      {"model.layers.0.mlp.up_proj.weight", C::kFfn, S::kColumnParallel},
      {"model.layers.0.mlp.down_proj.weight", C::kFfn, S::kRowParallel},
      {"model.layers.0.input_layernorm.weight", C::kNorm, S::kReplicated},
      {"model.layers.0.post_attention_layernorm.weight", C::kNorm, S::kReplicated},
      {"model.norm.weight", C::kNorm, S::kReplicated},
      {"model.rotary_emb.inv_freq", C::kOther, S::kReplicated},
      // GPT-2 style names.
      {"transformer.wte.weight", C::kEmbedding, S::kColumnParallel},
      {"transformer.h.0.attn.c_attn.weight", C::kAttnQkv, S::kColumnParallel},
      {"transformer.h.0.attn.c_proj.weight", C::kAttnO, S::kRowParallel},
      {"transformer.h.0.ln_1.weight", C::kNorm, S::kReplicated},
      {"transformer.h.0.mlp.c_fc.weight", C::kFfn, S::kColumnParallel},
      {"transformer.h.0.mlp.c_proj.weight", C::kFfn, S::kRowParallel},
      // Fused qkv (Phi-3 style).
      {"model.layers.0.self_attn.qkv_proj.weight", C::kAttnQkv, S::kColumnParallel},
  });
}

TEST(ClassifyTensor, MoeDeepSeekQwenMixtralNames) {
  ExpectTable({
      {"model.layers.3.mlp.experts.17.gate_proj.weight", C::kMoeExpert, S::kExpertParallel},
      {"model.layers.3.mlp.experts.17.down_proj.weight", C::kMoeExpert, S::kExpertParallel},
      {"model.layers.3.mlp.experts.17.down_proj.weight_scale_inv", C::kMoeExpert, S::kExpertParallel},
      {"model.layers.3.mlp.shared_experts.gate_proj.weight", C::kMoeSharedExpert, S::kColumnParallel},
      {"model.layers.3.mlp.shared_experts.down_proj.weight", C::kMoeSharedExpert, S::kRowParallel},
      {"model.layers.3.mlp.gate.weight", C::kMoeGate, S::kReplicated},
      {"model.layers.3.mlp.gate.e_score_correction_bias", C::kMoeGate, S::kReplicated},
      {"model.layers.0.mlp.shared_expert.up_proj.weight", C::kMoeSharedExpert, S::kColumnParallel},
      {"model.layers.0.mlp.shared_expert_gate.weight", C::kMoeGate, S::kReplicated},
      {"model.layers.0.block_sparse_moe.experts.0.w1.weight", C::kMoeExpert, S::kExpertParallel},
      {"model.layers.0.block_sparse_moe.gate.weight", C::kMoeGate, S::kReplicated},
      {"model.language_model.layers.0.mlp.experts.gate_up_proj", C::kMoeExpert, S::kExpertParallel},
      // A dense layer of a MoE model (DeepSeek first_k_dense_replace).
      {"model.layers.0.mlp.down_proj.weight", C::kFfn, S::kRowParallel},
  });
}

TEST(ClassifyTensor, MlaNames) {
  ExpectTable({
      {"model.layers.0.self_attn.q_a_proj.weight", C::kAttnQ, S::kReplicated},
      {"model.layers.0.self_attn.q_a_layernorm.weight", C::kNorm, S::kReplicated},
      {"model.layers.0.self_attn.q_b_proj.weight", C::kAttnQ, S::kColumnParallel},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", C::kAttnKvCompress, S::kReplicated},
      {"model.layers.0.self_attn.kv_a_layernorm.weight", C::kNorm, S::kReplicated},
      {"model.layers.0.self_attn.kv_b_proj.weight", C::kAttnKvCompress, S::kColumnParallel},
      {"model.layers.0.self_attn.o_proj.weight", C::kAttnO, S::kRowParallel},
      {"model.layers.0.self_attn.indexer.wq_b.weight", C::kAttnOther, S::kReplicated},
      {"model.layers.0.self_attn.indexer.k_norm.weight", C::kAttnOther, S::kReplicated},
      {"model.layers.0.self_attn.attn_sink", C::kAttnOther, S::kReplicated},
      {"model.layers.0.self_attn.conv.weight", C::kAttnConv, S::kReplicated},
  });
}

TEST(ClassifyTensor, MtpByName) {
  ExpectTable({
      {"mtp.fc.weight", C::kMtpFc, S::kColumnParallel},
      {"mtp.pre_fc_norm_embedding.weight", C::kMtpNorm, S::kReplicated},
      {"mtp.pre_fc_norm_hidden.weight", C::kMtpNorm, S::kReplicated},
      {"mtp.norm.weight", C::kMtpNorm, S::kReplicated},
      {"mtp.layers.0.input_layernorm.weight", C::kMtpNorm, S::kReplicated},
      {"mtp.layers.0.self_attn.q_proj.weight", C::kMtpAttn, S::kColumnParallel},
      {"mtp.layers.0.self_attn.o_proj.weight", C::kMtpAttn, S::kRowParallel},
      {"mtp.layers.0.mlp.experts.0.up_proj.weight", C::kMtpExpert, S::kExpertParallel},
      {"mtp.layers.0.mlp.experts.gate_up_proj", C::kMtpExpert, S::kExpertParallel},
      {"mtp.layers.0.mlp.shared_expert.down_proj.weight", C::kMtpSharedExpert, S::kRowParallel},
      {"mtp.layers.0.mlp.shared_expert.up_proj.weight", C::kMtpSharedExpert, S::kColumnParallel},
      {"mtp.layers.0.mlp.shared_expert_gate.weight", C::kMtpGate, S::kReplicated},
      {"mtp.layers.0.mlp.gate.weight", C::kMtpGate, S::kReplicated},
  });
}

TEST(ClassifyTensor, MtpByLayerIndexBeyondNumHiddenLayers) {
  ExpectTable({
      {"model.layers.61.eh_proj.weight", C::kMtpFc, S::kReplicated, 61},
      {"model.layers.61.enorm.weight", C::kMtpNorm, S::kReplicated, 61},
      {"model.layers.61.hnorm.weight", C::kMtpNorm, S::kReplicated, 61},
      {"model.layers.61.mlp.experts.5.gate_proj.weight", C::kMtpExpert, S::kExpertParallel, 61},
      {"model.layers.61.mlp.shared_experts.down_proj.weight", C::kMtpSharedExpert, S::kRowParallel, 61},
      {"model.layers.61.mlp.gate.weight", C::kMtpGate, S::kReplicated, 61},
      {"model.layers.61.self_attn.kv_a_proj_with_mqa.weight", C::kMtpAttn, S::kReplicated, 61},
      {"model.layers.61.self_attn.q_b_proj.weight", C::kMtpAttn, S::kColumnParallel, 61},
      {"model.layers.61.embed_tokens.weight", C::kMtpOther, S::kColumnParallel, 61},
      {"model.layers.61.shared_head.head.weight", C::kMtpOther, S::kColumnParallel, 61},
      {"model.layers.61.shared_head.norm.weight", C::kMtpNorm, S::kReplicated, 61},
      // The last real layer is not MTP.
      {"model.layers.60.mlp.experts.5.gate_proj.weight", C::kMoeExpert, S::kExpertParallel, 61},
      // Without num_hidden_layers the layer index alone proves nothing.
      {"model.layers.61.mlp.experts.5.gate_proj.weight", C::kMoeExpert, S::kExpertParallel, 0},
  });
}

TEST(ClassifyTensor, VisionNames) {
  ExpectTable({
      {"visual.blocks.0.attn.qkv.weight", C::kVision, S::kColumnParallel},
      {"visual.blocks.0.attn.proj.weight", C::kVision, S::kRowParallel},
      {"visual.blocks.0.attn.proj.bias", C::kVision, S::kRowParallel},
      {"visual.blocks.0.norm1.weight", C::kVision, S::kReplicated},
      {"visual.patch_embed.proj.weight", C::kVision, S::kReplicated},
      {"visual.blocks.0.mlp.linear_fc1.weight", C::kVision, S::kColumnParallel},
      {"model.visual.blocks.0.mlp.linear_fc2.weight", C::kVision, S::kRowParallel},
      {"visual.merger.mlp.0.weight", C::kVision, S::kColumnParallel},
      {"vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight", C::kVision, S::kColumnParallel},
      {"vision_tower.vision_model.encoder.layers.0.self_attn.out_proj.weight", C::kVision, S::kRowParallel},
      {"vision_tower.vision_model.encoder.layers.0.mlp.fc2.weight", C::kVision, S::kRowParallel},
      {"multi_modal_projector.linear_1.weight", C::kVision, S::kColumnParallel},
  });
}

TEST(ClassifyTensor, LinearAttentionMambaNames) {
  ExpectTable({
      {"model.layers.0.linear_attn.in_proj_qkvz.weight", C::kLinearAttnQkv, S::kColumnParallel},
      {"model.language_model.layers.0.linear_attn.in_proj_qkv.weight", C::kLinearAttnQkv, S::kColumnParallel},
      {"model.layers.0.linear_attn.in_proj_z.weight", C::kLinearAttnProj, S::kColumnParallel},
      {"model.layers.0.linear_attn.out_proj.weight", C::kLinearAttnProj, S::kRowParallel},
      {"model.layers.0.linear_attn.conv1d.weight", C::kLinearAttnConv, S::kColumnParallel},
      {"model.layers.0.linear_attn.A_log", C::kLinearAttnParam, S::kColumnParallel},
      {"model.layers.0.linear_attn.dt_bias", C::kLinearAttnParam, S::kColumnParallel},
      {"model.layers.0.linear_attn.in_proj_ba.weight", C::kLinearAttnParam, S::kColumnParallel},
      {"model.layers.0.linear_attn.norm.weight", C::kLinearAttnParam, S::kReplicated},
      {"model.layers.0.mamba.in_proj.weight", C::kLinearAttnQkv, S::kColumnParallel},
      {"model.layers.0.mamba.conv1d.weight", C::kLinearAttnConv, S::kColumnParallel},
      {"model.layers.0.mamba.out_proj.weight", C::kLinearAttnProj, S::kRowParallel},
  });
}

TEST(ClassifyTensor, QuantParamsOutsideModules) {
  ExpectTable({
      {"model.layers.0.smooth_scale", C::kQuantParam, S::kReplicated},
      {"model.layers.0.act_zero_point", C::kQuantParam, S::kReplicated},
      // Inside a module the module decides (scales shard with their weight).
      {"model.layers.0.self_attn.o_proj.weight_scale", C::kAttnO, S::kRowParallel},
  });
}

// Six tensors covering each divisor, one with an uneven split.
std::vector<WeightTensor> SampleTensors() {
  return {
      {"a.safetensors", "model.embed_tokens.weight", "BF16", {10, 50}, 1000},
      {"a.safetensors", "model.norm.weight", "F32", {25}, 100},
      {"a.safetensors", "model.layers.0.mlp.experts.0.gate_proj.weight", "BF16", {40, 100}, 8000},
      {"b.safetensors", "model.layers.0.self_attn.o_proj.weight", "BF16", {20, 100}, 4000},
      {"b.safetensors", "model.layers.0.mlp.gate.weight", "BF16", {32}, 64},
      {"b.safetensors", "model.layers.0.self_attn.q_proj.weight", "U8", {1001}, 1001},
  };
}

TEST(AttributeWeights, Tp2) {
  auto a = AttributeWeights(SampleTensors(), ParallelConfig{2, 1, false});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->ep, 2);
  EXPECT_EQ(a->total_bytes, 14165u);
  // 500 + 100 + 4000 + 2000 + 64 + ceil(1001/2)=501
  EXPECT_EQ(a->per_device_bytes, 7165u);
  EXPECT_EQ(a->tensors[5].per_device_bytes, 501u);
  EXPECT_EQ(a->tensors[2].divisor, 2u);
  EXPECT_TRUE(a->rule_based_inference);
}

TEST(AttributeWeights, Tp4Dp2WithoutExpertParallel) {
  auto a = AttributeWeights(SampleTensors(), ParallelConfig{4, 2, false});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ep, 4);
  // 250 + 100 + 2000 + 1000 + 64 + ceil(1001/4)=251
  EXPECT_EQ(a->per_device_bytes, 3665u);
}

TEST(AttributeWeights, Tp4Dp2WithExpertParallel) {
  auto a = AttributeWeights(SampleTensors(), ParallelConfig{4, 2, true});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ep, 8);
  // 250 + 100 + 8000/8 + 1000 + 64 + 251
  EXPECT_EQ(a->per_device_bytes, 2665u);
  EXPECT_EQ(a->tensors[2].per_device_bytes, 1000u);
}

TEST(AttributeWeights, CategoryTotalsInReportOrder) {
  auto a = AttributeWeights(SampleTensors(), ParallelConfig{2, 1, false});
  ASSERT_TRUE(a.ok());
  std::vector<std::string> keys;
  for (const CategoryTotal& c : a->categories) keys.push_back(WeightCategoryKey(c.category));
  EXPECT_EQ(keys, (std::vector<std::string>{"embedding", "attn_q", "attn_o", "moe_expert", "moe_gate", "norm"}));
  uint64_t sum_total = 0, sum_device = 0;
  for (const CategoryTotal& c : a->categories) {
    sum_total += c.bytes;
    sum_device += c.per_device_bytes;
  }
  EXPECT_EQ(sum_total, a->total_bytes);
  EXPECT_EQ(sum_device, a->per_device_bytes);
  EXPECT_EQ(a->categories[5].dtypes, (std::set<std::string>{"F32"}));
  EXPECT_EQ(a->categories[3].strategies, (std::set<std::string>{"expert_parallel"}));
}

TEST(AttributeWeights, RejectsBadParallelism) {
  EXPECT_FALSE(AttributeWeights(SampleTensors(), ParallelConfig{0, 1, false}).ok());
  EXPECT_FALSE(AttributeWeights(SampleTensors(), ParallelConfig{1, 0, false}).ok());
}

TEST(AttributeWeights, FromParsedHeader) {
  auto h = ParseSafetensorsHeader(
      R"({"lm_head.weight":{"dtype":"BF16","shape":[8,4],"data_offsets":[0,64]},)"
      R"("model.norm.weight":{"dtype":"BF16","shape":[4],"data_offsets":[64,72]}})");
  ASSERT_TRUE(h.ok());
  auto a = AttributeWeights(WeightTensorsFromHeader(*h, "model-00001-of-00002.safetensors"),
                            ParallelConfig{4, 1, false});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->per_device_bytes, 16u + 8u);
  EXPECT_EQ(a->tensors[0].tensor.file, "model-00001-of-00002.safetensors");
}

TEST(WeightManifestJson, Shape) {
  auto a = AttributeWeights(SampleTensors(), ParallelConfig{4, 2, true});
  ASSERT_TRUE(a.ok());
  nlohmann::json j = WeightManifestJson(*a);
  EXPECT_EQ(j["rule_based_inference"], true);
  EXPECT_EQ(j["tp"], 4);
  EXPECT_EQ(j["dp"], 2);
  EXPECT_EQ(j["ep"], 8);
  EXPECT_EQ(j["total_bytes"], 14165u);
  EXPECT_EQ(j["per_device_bytes"], 2665u);
  EXPECT_EQ(j["num_safetensors_files"], 2u);
  ASSERT_EQ(j["tensors"].size(), 6u);
  EXPECT_EQ(j["tensors"][2]["category"], "moe_expert");
  EXPECT_EQ(j["tensors"][2]["shard_strategy"], "expert_parallel");
  EXPECT_EQ(j["tensors"][2]["numel"], 4000u);
  EXPECT_EQ(j["tensors"][2]["byte_size"], 8000u);
  EXPECT_EQ(j["tensors"][2]["per_device_bytes"], 1000u);
  ASSERT_EQ(j["categories"].size(), 6u);
  EXPECT_EQ(j["categories"][0]["category"], "embedding");
  EXPECT_EQ(j["categories"][0]["display_name"], "Embedding");
  EXPECT_DOUBLE_EQ(j["categories"][0]["share_of_per_device"].get<double>(), 250.0 / 2665.0);
  EXPECT_NE(j["note"].get<std::string>().find("rule-based inference"), std::string::npos);
}

TEST(EstimateWeightsFromConfig, DenseMatchesKnownParameterCount) {
  // Mistral-7B-v0.1's config: 7,241,732,096 parameters.
  nlohmann::json config = {{"hidden_size", 4096}, {"num_hidden_layers", 32}, {"vocab_size", 32000},
                           {"num_attention_heads", 32}, {"num_key_value_heads", 8},
                           {"intermediate_size", 14336}, {"tie_word_embeddings", false},
                           {"torch_dtype", "bfloat16"}};
  auto t = EstimateWeightsFromConfig(config, ParallelConfig{2, 1, false});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->label, "theory, reference only");
  EXPECT_EQ(t->total_params, 7241732096u);
  EXPECT_EQ(t->total_bytes, 2u * 7241732096u);
  // Everything but the norms (266,240 params) splits over TP=2.
  EXPECT_EQ(t->per_device_bytes, (2u * 7241732096u - 2u * 266240u) / 2u + 2u * 266240u);
  nlohmann::json j = WeightTheoryJson(*t);
  EXPECT_EQ(j["label"], "theory, reference only");
}

TEST(EstimateWeightsFromConfig, MoeWithMtpAndExpertParallel) {
  nlohmann::json config = {{"hidden_size", 16}, {"num_hidden_layers", 4}, {"vocab_size", 100},
                           {"num_attention_heads", 2}, {"num_key_value_heads", 2}, {"head_dim", 8},
                           {"intermediate_size", 64}, {"moe_intermediate_size", 8},
                           {"n_routed_experts", 8}, {"n_shared_experts", 1},
                           {"first_k_dense_replace", 1}, {"num_nextn_predict_layers", 1},
                           {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"}};
  auto t = EstimateWeightsFromConfig(config, ParallelConfig{2, 2, true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const TheoryComponent* experts = nullptr;
  for (const TheoryComponent& c : t->components) {
    if (c.name == "moe_experts") experts = &c;
    EXPECT_NE(c.name, "lm_head");  // tied
  }
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->params, 3u * 8u * 3u * 16u * 8u);  // 3 MoE layers x 8 experts x 3HI
  EXPECT_EQ(experts->per_device_bytes, experts->bytes / 4u);  // EP = 2 x 2
}

TEST(EstimateWeightsFromConfig, TextConfigAndLinearAttentionLayers) {
  nlohmann::json config = {
      {"text_config",
       {{"hidden_size", 8}, {"num_hidden_layers", 4}, {"vocab_size", 10}, {"num_attention_heads", 2},
        {"num_key_value_heads", 1}, {"head_dim", 4}, {"intermediate_size", 16},
        {"layer_types", {"linear_attention", "linear_attention", "linear_attention", "full_attention"}},
        {"linear_num_key_heads", 2}, {"linear_key_head_dim", 4}, {"linear_num_value_heads", 2},
        {"linear_value_head_dim", 4}, {"linear_conv_kernel_dim", 4}}},
      {"vision_config", {{"hidden_size", 8}, {"depth", 2}, {"intermediate_size", 16}, {"patch_size", 2}}},
      {"torch_dtype", "float32"}};
  auto t = EstimateWeightsFromConfig(config, ParallelConfig{1, 1, false});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->bytes_per_param, 4u);
  std::map<std::string, uint64_t> params;
  for (const TheoryComponent& c : t->components) params[c.name] = c.params;
  // one full-attention layer: 2*8*2*4 + 2*8*1*4
  EXPECT_EQ(params["attention"], 128u + 64u);
  // three linear layers: H*qkv(24) + 2*H*8 + 2*H*2 + 24*4 + 2*2 + 4 = 192+128+32+96+8 = 456
  EXPECT_EQ(params["linear_attention"], 3u * 456u);
  EXPECT_GT(params["vision_encoder"], 0u);
}

TEST(EstimateWeightsFromConfig, MissingFieldsAreErrors) {
  auto t = EstimateWeightsFromConfig(nlohmann::json{{"num_hidden_layers", 2}, {"vocab_size", 5}},
                                     ParallelConfig{});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("hidden_size"), std::string::npos);
}

}  // namespace
}  // namespace npuprof
