"""Build fake-but-valid model directories: config.json plus safetensors files
whose data region is a sparse hole. Tensor names follow real checkpoints:
Llama/Qwen dense, DeepSeek-style MoE with MLA, Qwen3-Next-style MTP and
hybrid linear attention, Qwen2.5-VL-style vision tower."""
import json
import os

from . import safetensors_io

DEFAULTS = {
    "dense": dict(layers=28, hidden=3584, intermediate=18944, vocab=152064, heads=28, kv_heads=4, head_dim=128),
    "moe": dict(layers=8, hidden=2048, intermediate=10944, vocab=102400, heads=16, kv_heads=16, head_dim=128,
                experts=64, moe_intermediate=1408, shared_experts=2, first_dense=1,
                q_lora_rank=0, kv_lora_rank=512, rope_dim=64, v_head_dim=128),
    "mtp": dict(layers=12, hidden=2048, intermediate=6144, vocab=151936, heads=16, kv_heads=2, head_dim=256,
                experts=32, moe_intermediate=512, shared_experts=1, mtp_layers=1),
    "vision": dict(layers=28, hidden=3584, intermediate=18944, vocab=152064, heads=28, kv_heads=4, head_dim=128,
                   vision_depth=32, vision_hidden=1280, vision_intermediate=3420),
    "hybrid": dict(layers=12, hidden=2048, intermediate=5632, vocab=151936, heads=16, kv_heads=2, head_dim=256,
                   linear_heads=16, linear_key_dim=128, linear_value_dim=128, conv_kernel=4, full_every=4),
}
ARCH = {"dense": ("Qwen2ForCausalLM", "qwen2"), "moe": ("DeepseekV2ForCausalLM", "deepseek_v2"),
        "mtp": ("Qwen3NextForCausalLM", "qwen3_next"), "vision": ("Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl"),
        "hybrid": ("Qwen3NextForCausalLM", "qwen3_next")}


def _attn(p, L, dt, c):
    H, nh, kvh, hd = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"]
    a = "%s.layers.%d.self_attn." % (p, L)
    return [(a + "q_proj.weight", dt, [nh * hd, H]), (a + "k_proj.weight", dt, [kvh * hd, H]),
            (a + "v_proj.weight", dt, [kvh * hd, H]), (a + "o_proj.weight", dt, [H, nh * hd])]


def _mla(p, L, dt, c):
    H, nh = c["hidden"], c["heads"]
    qk = c["head_dim"] + c["rope_dim"]
    a = "%s.layers.%d.self_attn." % (p, L)
    t = []
    if c["q_lora_rank"]:
        t += [(a + "q_a_proj.weight", dt, [c["q_lora_rank"], H]), (a + "q_a_layernorm.weight", dt, [c["q_lora_rank"]]),
              (a + "q_b_proj.weight", dt, [nh * qk, c["q_lora_rank"]])]
    else:
        t += [(a + "q_proj.weight", dt, [nh * qk, H])]
    t += [(a + "kv_a_proj_with_mqa.weight", dt, [c["kv_lora_rank"] + c["rope_dim"], H]),
          (a + "kv_a_layernorm.weight", dt, [c["kv_lora_rank"]]),
          (a + "kv_b_proj.weight", dt, [nh * (c["head_dim"] + c["v_head_dim"]), c["kv_lora_rank"]]),
          (a + "o_proj.weight", dt, [H, nh * c["v_head_dim"]])]
    return t


def _ffn(prefix, dt, H, I):
    return [(prefix + "gate_proj.weight", dt, [I, H]), (prefix + "up_proj.weight", dt, [I, H]),
            (prefix + "down_proj.weight", dt, [H, I])]


def _moe(prefix, dt, c, shared_name):
    H = c["hidden"]
    t = [(prefix + "gate.weight", dt, [c["experts"], H])]
    for e in range(c["experts"]):
        t += _ffn("%sexperts.%d." % (prefix, e), dt, H, c["moe_intermediate"])
    if c.get("shared_experts"):
        t += _ffn(prefix + shared_name + ".", dt, H, c["moe_intermediate"] * c["shared_experts"])
    return t


def _norms(p, L, dt, H):
    return [("%s.layers.%d.input_layernorm.weight" % (p, L), dt, [H]),
            ("%s.layers.%d.post_attention_layernorm.weight" % (p, L), dt, [H])]


def _linear_attn(p, L, dt, c):
    H, nh, kd, vd = c["hidden"], c["linear_heads"], c["linear_key_dim"], c["linear_value_dim"]
    a = "%s.layers.%d.linear_attn." % (p, L)
    qkv = nh * (2 * kd + vd)
    return [(a + "in_proj_qkv.weight", dt, [qkv, H]), (a + "in_proj_z.weight", dt, [nh * vd, H]),
            (a + "in_proj_b.weight", dt, [nh, H]), (a + "in_proj_a.weight", dt, [nh, H]),
            (a + "conv1d.weight", dt, [qkv, 1, c["conv_kernel"]]),
            (a + "A_log", "F32", [nh]), (a + "dt_bias", "F32", [nh]),
            (a + "norm.weight", "F32", [vd]), (a + "out_proj.weight", dt, [H, nh * vd])]


def build_tensors(kind, c, dt):
    H = c["hidden"]
    p = "model"
    t = [(p + ".embed_tokens.weight", dt, [c["vocab"], H])]
    for L in range(c["layers"]):
        t += _norms(p, L, dt, H)
        if kind == "moe":
            t += _mla(p, L, dt, c)
            if L < c["first_dense"]:
                t += _ffn("%s.layers.%d.mlp." % (p, L), dt, H, c["intermediate"])
            else:
                t += _moe("%s.layers.%d.mlp." % (p, L), dt, c, "shared_experts")
                t += [("%s.layers.%d.mlp.gate.e_score_correction_bias" % (p, L), "F32", [c["experts"]])]
            continue
        if kind == "hybrid" and (L + 1) % c["full_every"]:
            t += _linear_attn(p, L, dt, c)
        else:
            t += _attn(p, L, dt, c)
            if kind in ("mtp", "hybrid"):
                a = "%s.layers.%d.self_attn." % (p, L)
                t += [(a + "q_norm.weight", dt, [c["head_dim"]]), (a + "k_norm.weight", dt, [c["head_dim"]])]
        if kind == "mtp":
            t += _moe("%s.layers.%d.mlp." % (p, L), dt, c, "shared_expert")
            t += [("%s.layers.%d.mlp.shared_expert_gate.weight" % (p, L), dt, [1, H])]
        else:
            t += _ffn("%s.layers.%d.mlp." % (p, L), dt, H, c["intermediate"])
    t += [(p + ".norm.weight", dt, [H])]
    if not c.get("tie"):
        t += [("lm_head.weight", dt, [c["vocab"], H])]
    if kind == "mtp":
        for L in range(c["mtp_layers"]):
            m = "mtp.layers.%d" % L
            t += [("mtp.fc.weight", dt, [H, 2 * H]), ("mtp.pre_fc_norm_embedding.weight", dt, [H]),
                  ("mtp.pre_fc_norm_hidden.weight", dt, [H]), ("mtp.norm.weight", dt, [H])] if L == 0 else []
            t += _norms("mtp", L, dt, H)
            t += [(x.replace("mtp.layers.%d.self_attn." % L, m + ".self_attn."), d, s) for x, d, s in _attn("mtp", L, dt, c)]
            t += _moe(m + ".mlp.", dt, c, "shared_expert")
            t += [(m + ".mlp.shared_expert_gate.weight", dt, [1, H])]
    if kind == "vision":
        VH, VI = c["vision_hidden"], c["vision_intermediate"]
        t += [("visual.patch_embed.proj.weight", dt, [VH, 3, 2, 14, 14])]
        for b in range(c["vision_depth"]):
            v = "visual.blocks.%d." % b
            t += [(v + "norm1.weight", dt, [VH]), (v + "norm2.weight", dt, [VH]),
                  (v + "attn.qkv.weight", dt, [3 * VH, VH]), (v + "attn.qkv.bias", dt, [3 * VH]),
                  (v + "attn.proj.weight", dt, [VH, VH]), (v + "attn.proj.bias", dt, [VH])]
            t += _ffn(v + "mlp.", dt, VH, VI)
        t += [("visual.merger.ln_q.weight", dt, [VH]), ("visual.merger.mlp.0.weight", dt, [4 * VH, 4 * VH]),
              ("visual.merger.mlp.2.weight", dt, [H, 4 * VH])]
    return t


def build_config(kind, c, dtype):
    arch, mtype = ARCH[kind]
    cfg = {"architectures": [arch], "model_type": mtype, "hidden_size": c["hidden"],
           "num_hidden_layers": c["layers"], "num_attention_heads": c["heads"],
           "num_key_value_heads": c["kv_heads"], "head_dim": c["head_dim"],
           "intermediate_size": c["intermediate"], "vocab_size": c["vocab"],
           "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
           "tie_word_embeddings": bool(c.get("tie")), "torch_dtype": "bfloat16" if dtype == "BF16" else "float32"}
    if kind == "moe":
        cfg.update({"n_routed_experts": c["experts"], "n_shared_experts": c["shared_experts"],
                    "moe_intermediate_size": c["moe_intermediate"], "first_k_dense_replace": c["first_dense"],
                    "q_lora_rank": c["q_lora_rank"] or None, "kv_lora_rank": c["kv_lora_rank"],
                    "qk_nope_head_dim": c["head_dim"], "qk_rope_head_dim": c["rope_dim"],
                    "v_head_dim": c["v_head_dim"], "num_experts_per_tok": 6})
    if kind == "mtp":
        cfg.update({"num_experts": c["experts"], "moe_intermediate_size": c["moe_intermediate"],
                    "shared_expert_intermediate_size": c["moe_intermediate"] * c["shared_experts"],
                    "num_experts_per_tok": 4, "mtp_num_hidden_layers": c["mtp_layers"]})
    if kind == "hybrid":
        cfg.update({"layer_types": ["full_attention" if (L + 1) % c["full_every"] == 0 else "linear_attention"
                                    for L in range(c["layers"])],
                    "linear_num_key_heads": c["linear_heads"], "linear_num_value_heads": c["linear_heads"],
                    "linear_key_head_dim": c["linear_key_dim"], "linear_value_head_dim": c["linear_value_dim"],
                    "linear_conv_kernel_dim": c["conv_kernel"], "full_attention_interval": c["full_every"]})
    if kind == "vision":
        cfg["vision_config"] = {"depth": c["vision_depth"], "hidden_size": c["vision_hidden"],
                                "intermediate_size": c["vision_intermediate"], "out_hidden_size": c["hidden"],
                                "patch_size": 14, "spatial_merge_size": 2}
        cfg["image_token_id"] = 151655
    return cfg


def make_model(out, kind="dense", dtype="bf16", shards=1, **overrides):
    """Write the model dir; returns a summary dict (files, tensor count, bytes)."""
    if kind not in DEFAULTS:
        raise ValueError("unknown kind %r" % kind)
    c = dict(DEFAULTS[kind])
    for k, v in overrides.items():
        if v is not None:
            c[k] = v
    dt = {"bf16": "BF16", "f32": "F32", "f16": "F16"}[dtype.lower()]
    tensors = build_tensors(kind, c, dt)
    os.makedirs(out, exist_ok=True)
    shards = max(1, min(shards, len(tensors)))
    per = -(-len(tensors) // shards)
    files, weight_map, total = [], {}, 0
    for i in range(shards):
        part = tensors[i * per:(i + 1) * per]
        if not part:
            continue
        fname = "model.safetensors" if shards == 1 else "model-%05d-of-%05d.safetensors" % (i + 1, shards)
        safetensors_io.write_sparse(os.path.join(out, fname), part, metadata={"format": "pt"})
        files.append(fname)
        for name, d, s in part:
            weight_map[name] = fname
            total += safetensors_io.tensor_bytes(d, s)
    if shards > 1:
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(build_config(kind, c, dt), f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"temperature": 0.7, "top_p": 0.8}, f)
    return {"dir": os.path.abspath(out), "kind": kind, "dtype": dt, "files": files,
            "tensors": len(tensors), "total_bytes": total, "params": c}
