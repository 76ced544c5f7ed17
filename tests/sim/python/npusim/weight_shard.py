"""Classify checkpoint tensors by name and give each category a shard rule
(docs/BEHAVIOUR.md#weights-shards). This is the simulator's own rule set:
it decides how many bytes each simulated rank really holds."""
import re

TP = "tp"          # column- or row-parallel: divided by TP
EP = "ep"          # expert-parallel: divided by EP
REPL = "replicated"

_QUANT = re.compile(r"(weight_scale|weight_offset|zero_point|input_scale|input_offset|deq_scale|quant_bias|\.scales?$|qzeros|g_idx)")
_NORM = re.compile(r"(norm|ln_\d|\.ln\.|layernorm)")


def classify(name):
    """-> (category, strategy)."""
    n = name
    if n.startswith("visual.") or ".visual." in n or "vision_tower" in n or n.startswith("vision_model."):
        if _NORM.search(n):
            return "norm", REPL
        if "patch_embed" in n or "pos_embed" in n:
            return "vision_embed", REPL
        return "vision_encoder", TP
    if _QUANT.search(n):
        return "quant_params", REPL
    if n.startswith("mtp.") or ".mtp." in n:
        if ".experts." in n:
            return "mtp_experts", EP
        if "shared_expert_gate" in n:
            return "mtp_gate", REPL
        if "shared_expert" in n:
            return "mtp_shared_expert", TP
        if ".mlp.gate." in n:
            return "mtp_gate", REPL
        if _NORM.search(n):
            return "mtp_norm", REPL
        if "self_attn" in n or "attn." in n:
            return "mtp_attention", TP
        if ".fc." in n or n.endswith(".fc.weight"):
            return "mtp_fc", TP
        return "mtp_other", REPL
    if "embed_tokens" in n or "wte." in n:
        return "embedding", TP
    if n.startswith("lm_head") or ".lm_head." in n:
        return "lm_head", TP
    if "linear_attn." in n:
        if _NORM.search(n):
            return "norm", REPL
        if "in_proj_qkv" in n or "in_proj_qkvz" in n:
            return "linear_attn_qkv", TP
        if "in_proj_z" in n or "out_proj" in n:
            return "linear_attn_z_out", TP
        if "conv1d" in n:
            return "linear_attn_conv", TP
        return "linear_attn_params", TP
    if "self_attn." in n or ".attention." in n:
        if _NORM.search(n):
            return "norm", REPL
        if re.search(r"\.(q|k|v|o|qkv)_proj\.|\.q_a_proj\.|\.q_b_proj\.|\.kv_b_proj\.|\.q_proj\.|\.dense\.|\.query_key_value\.", n):
            return "attention_qkvo", TP
        if "kv_a_proj" in n or "compress" in n:
            return "attention_kv_compress", TP
        if "conv" in n:
            return "attention_conv", REPL
        return "attention_other", REPL
    if ".experts." in n:
        return "mlp_experts", EP
    if "shared_expert_gate" in n:
        return "mlp_router_gate", REPL
    if "shared_expert" in n:
        return "mlp_shared_expert", TP
    if re.search(r"\.mlp\.gate\.", n) or "e_score_correction_bias" in n or ".router." in n:
        return "mlp_router_gate", REPL
    if re.search(r"\.mlp\.(gate_proj|up_proj|down_proj|gate_up_proj|fc1|fc2|dense_h_to_4h|dense_4h_to_h)\.", n):
        return "mlp_dense_ffn", TP
    if ".mlp." in n or ".block_sparse_moe." in n:
        return "moe_other", REPL
    if _NORM.search(n):
        return "norm", REPL
    return "other", REPL


def divisors(tp, dp=1, expert_parallel=False):
    ep = tp * max(dp, 1) if expert_parallel else tp
    return {TP: tp, EP: ep, REPL: 1}


def per_device(tensors, tp, dp=1, expert_parallel=False):
    """tensors: [(name, dtype, shape, nbytes)].
    -> {"total_bytes", "per_device_bytes" (float), "by_category": {cat: {...}}}"""
    div = divisors(tp, dp, expert_parallel)
    cats = {}
    total = 0
    per = 0.0
    for name, dtype, _shape, nbytes in tensors:
        cat, strat = classify(name)
        c = cats.setdefault(cat, {"strategy": strat, "bytes": 0, "per_device_bytes": 0.0,
                                  "tensors": 0, "dtypes": []})
        c["bytes"] += nbytes
        c["per_device_bytes"] += nbytes / div[strat]
        c["tensors"] += 1
        if dtype not in c["dtypes"]:
            c["dtypes"].append(dtype)
        total += nbytes
        per += nbytes / div[strat]
    return {"total_bytes": total, "per_device_bytes": per, "tp": tp, "dp": dp,
            "ep": div[EP], "by_category": cats}
