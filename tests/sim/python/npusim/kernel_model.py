"""The NPU kernels one simulated rank runs for the requests of a profiling
window: which kernels (names and types as kernel_details.csv shows them on
vllm-ascend), how many (one prefill step, then one decode step per further
output token, each through the model's layers) and how long (a roofline
cost: launch overhead + max(compute, memory traffic) for the shapes the
model config and tp give).

Config (`kernels` in config.json):
  max_steps_per_request  16  steps kept per request (prefill + decode), to keep files small
  max_layers              4  decoder layers kept per step
  slow                   {}  {"<kernel Type or Name>": factor}: those kernels take factor x as long
Counts are exact below the caps: a request with P prompt and N output tokens
runs min(N, max_steps) steps; each step runs min(layers, max_layers) layers.
HCCL all-reduce names carry a call-site suffix, as the real ones do
(`hcom_allReduce__<comm>_0_1` after attention, `..._1_1` after the MLP):
a summary should group communication by Type."""

DEFAULTS = {"max_steps_per_request": 16, "max_layers": 4, "slow": {}}

FLOP_PER_US = 1.5e8      # effective cube throughput (≈150 TFLOPS bf16)
BYTE_PER_US = 1.2e6      # effective HBM bandwidth (≈1.2 TB/s)
LINK_BYTE_PER_US = 5e4   # effective all-reduce bandwidth per rank
OVERHEAD_US = {"AI_CORE": 6.0, "AI_VECTOR_CORE": 3.0, "MIX_AIC": 8.0, "HCCL": 15.0}

# key: (name, type, accelerator core, block dim)
KERNELS = {
    "embedding": ("aclnnEmbedding_GatherV2AiCore_GatherV2", "GatherV2", "AI_VECTOR_CORE", 40),
    "rmsnorm": ("aclnnRmsNorm_RmsNormAiCore_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 24),
    "add_rmsnorm": ("aclnnAddRmsNorm_AddRmsNormAiCore_AddRmsNorm", "AddRmsNorm", "AI_VECTOR_CORE", 24),
    "matmul_v3": ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE", 20),
    "matmul_v2": ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", 16),
    "rope": ("aclnnRotaryPositionEmbedding_RotaryPositionEmbeddingAiCore_RotaryPositionEmbedding",
             "RotaryPositionEmbedding", "AI_VECTOR_CORE", 40),
    "cache": ("aclnnReshapeAndCache_ReshapeAndCacheAiCore_ReshapeAndCache", "ReshapeAndCache", "AI_VECTOR_CORE", 40),
    "flash": ("aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore", "FlashAttentionScore",
              "MIX_AIC", 24),
    "fia": ("aclnnFusedInferAttentionScore_FusedInferAttentionScore", "FusedInferAttentionScore", "MIX_AIC", 20),
    "swiglu": ("aclnnSwiGlu_SwiGluAiCore_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", 40),
    "gating": ("aclnnMoeGatingTopKSoftmax_MoeGatingTopKSoftmaxAiCore_MoeGatingTopKSoftmax",
               "MoeGatingTopKSoftmax", "AI_VECTOR_CORE", 40),
    "routing": ("aclnnMoeInitRoutingV2_MoeInitRoutingV2AiCore_MoeInitRoutingV2", "MoeInitRoutingV2",
                "AI_VECTOR_CORE", 40),
    "grouped_mm": ("aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul", "GroupedMatmul", "AI_CORE", 20),
    "finalize": ("aclnnMoeFinalizeRoutingV2_MoeFinalizeRoutingV2AiCore_MoeFinalizeRoutingV2",
                 "MoeFinalizeRoutingV2", "AI_VECTOR_CORE", 40),
    "argmax": ("aclnnArgMax_ArgMaxV2AiCore_ArgMaxV2", "ArgMaxV2", "AI_VECTOR_CORE", 8),
}
ALLREDUCE_TYPE = "hcom_allReduce_"


def settings(cfg):
    k = dict(DEFAULTS)
    k.update(cfg.get("kernels") or {})
    k["slow"] = {str(n): float(f) for n, f in (k.get("slow") or {}).items()}
    return k


class Shapes:
    """Per-rank model dimensions from the HF config (tp shards heads and FFN)."""

    def __init__(self, mc, tp):
        self.tp = max(1, tp)
        self.h = int(mc.get("hidden_size", 1024))
        self.layers = int(mc.get("num_hidden_layers", 1))
        heads = int(mc.get("num_attention_heads", 8))
        self.hd = int(mc.get("head_dim") or self.h // max(1, heads))
        self.nh = max(1, heads // self.tp)
        self.nkv = max(1, int(mc.get("num_key_value_heads", heads)) // self.tp)
        self.ffn = max(1, int(mc.get("intermediate_size", 4 * self.h)) // self.tp)
        self.vocab = max(1, int(mc.get("vocab_size", 32000)) // self.tp)
        self.experts = int(mc.get("n_routed_experts") or mc.get("num_experts") or 0)
        self.topk = int(mc.get("num_experts_per_tok", 2) or 2)
        self.moe_ffn = max(1, int(mc.get("moe_intermediate_size", self.ffn)) // self.tp)


def _matmul(n, k, m):
    return max(2.0 * n * k * m / FLOP_PER_US, 2.0 * (n * k + k * m + n * m) / BYTE_PER_US), \
        '"""%d,%d;%d,%d"""' % (n, k, k, m), '"""%d,%d"""' % (n, m)


def _vector(elems, passes=2):
    return passes * 2.0 * elems / BYTE_PER_US


def _step_kernels(s, n, kv_len, prefill):
    """[(key, work_us, in_shapes, out_shapes)] of one step with n tokens per layer, then the head."""
    per_layer = []
    q = s.nh * s.hd
    kvd = s.nkv * s.hd
    act = '"""%d,%d"""' % (n, s.h)
    per_layer.append(("rmsnorm", _vector(n * s.h), act, act))
    per_layer.append(("matmul_v3",) + _matmul(n, s.h, q + 2 * kvd))
    per_layer.append(("rope", _vector(n * (q + kvd)), '"""%d,%d"""' % (n, q + kvd), '"""%d,%d"""' % (n, q + kvd)))
    per_layer.append(("cache", _vector(n * 2 * kvd, 1), '"""%d,%d"""' % (n, 2 * kvd), '"""%d,%d"""' % (n, 2 * kvd)))
    if prefill:
        per_layer.append(("flash", 2.0 * n * n * s.nh * s.hd / FLOP_PER_US, '"""%d,%d,%d"""' % (n, s.nh, s.hd),
                          '"""%d,%d,%d"""' % (n, s.nh, s.hd)))
    else:
        per_layer.append(("fia", 2.0 * 2 * kv_len * kvd / BYTE_PER_US, '"""%d,%d,%d"""' % (kv_len, s.nkv, s.hd),
                          '"""%d,%d,%d"""' % (n, s.nh, s.hd)))
    per_layer.append(("matmul_v2",) + _matmul(n, q, s.h))
    per_layer.append(("allreduce0", 2.0 * n * s.h / LINK_BYTE_PER_US, "N/A", "N/A"))
    per_layer.append(("add_rmsnorm", _vector(n * s.h, 3), act, act))
    if s.experts:
        per_layer.append(("matmul_v2",) + _matmul(n, s.h, s.experts))
        per_layer.append(("gating", _vector(n * s.experts), '"""%d,%d"""' % (n, s.experts),
                          '"""%d,%d"""' % (n, s.topk)))
        per_layer.append(("routing", _vector(n * s.topk * s.h), act, '"""%d,%d"""' % (n * s.topk, s.h)))
        rows = n * s.topk
        active = min(s.experts, max(1, rows))
        t, i_sh, o_sh = _matmul(rows, s.h, 2 * s.moe_ffn)
        per_layer.append(("grouped_mm", t + active * s.h * 2 * s.moe_ffn * 2 / BYTE_PER_US, i_sh, o_sh))
        per_layer.append(("swiglu", _vector(rows * 2 * s.moe_ffn, 3), o_sh, '"""%d,%d"""' % (rows, s.moe_ffn)))
        t, i_sh, o_sh = _matmul(rows, s.moe_ffn, s.h)
        per_layer.append(("grouped_mm", t + active * s.moe_ffn * s.h * 2 / BYTE_PER_US, i_sh, o_sh))
        per_layer.append(("finalize", _vector(rows * s.h), o_sh, act))
    else:
        per_layer.append(("matmul_v3",) + _matmul(n, s.h, 2 * s.ffn))
        per_layer.append(("swiglu", _vector(n * 2 * s.ffn, 3), '"""%d,%d"""' % (n, 2 * s.ffn),
                          '"""%d,%d"""' % (n, s.ffn)))
        per_layer.append(("matmul_v2",) + _matmul(n, s.ffn, s.h))
    per_layer.append(("allreduce1", 2.0 * n * s.h / LINK_BYTE_PER_US, "N/A", "N/A"))
    head = [("rmsnorm", _vector(s.h), '"""1,%d"""' % s.h, '"""1,%d"""' % s.h),
            ("matmul_v2",) + _matmul(1, s.h, s.vocab),
            ("argmax", _vector(s.vocab, 1), '"""1,%d"""' % s.vocab, '"""1"""')]
    return per_layer, head


_blake2s = None  # hashlib's, loaded by the first _jitter: setup_target.py imports this module and never needs it


def _jitter(seed):
    """Deterministic ±2 % spread."""
    global _blake2s
    if _blake2s is None:
        from hashlib import blake2s as _blake2s
    h = int.from_bytes(_blake2s(seed.encode(), digest_size=4).digest(), "little")
    return 1.0 + ((h % 41) - 20) / 1000.0


def tasks(requests, mc, tp, device, cfg, rank=0, comm=123):
    """NPU task list of one rank for the requests (dicts with t_start, prompt_tokens,
    completion_tokens), in the shape analyse() reads (sim_tasks.json)."""
    ks = settings(cfg)
    slow = ks["slow"]
    s = Shapes(mc, tp)
    layers = max(1, min(s.layers, int(ks["max_layers"])))
    out = []
    task_id = 1000
    for req in requests:
        t = req["t_start"] * 1e6 + 500.0
        prompt = max(1, int(req.get("prompt_tokens") or 1))
        steps = max(1, min(int(req.get("completion_tokens") or 1), int(ks["max_steps_per_request"])))
        for step in range(steps):
            prefill = step == 0
            n = prompt if prefill else 1
            per_layer, head = _step_kernels(s, n, prompt + step, prefill)
            emb = [("embedding", _vector(n * s.h, 1), '"""%d"""' % n, '"""%d,%d"""' % (n, s.h))]
            seq = emb + per_layer * layers + head
            for key, work, in_sh, out_sh in seq:
                if key.startswith("allreduce"):
                    if tp <= 1:
                        continue
                    name, typ, core, block = ("hcom_allReduce__%d_%s_1" % (comm, key[-1]), ALLREDUCE_TYPE, "HCCL", 0)
                else:
                    name, typ, core, block = KERNELS[key]
                factor = slow.get(typ, slow.get(name, 1.0))
                d = (OVERHEAD_US[core] + work) * _jitter("%d/%d" % (rank, task_id)) * factor
                out.append({"name": name, "type": typ, "core": core, "start_us": round(t, 3), "dur_us": round(d, 3),
                            "wait_us": 0.0 if prefill else 1.2, "block": block, "task_id": task_id, "stream": 2,
                            "step": 1, "device": device, "in_shapes": in_sh, "out_shapes": out_sh})
                t += d + 1.5
                task_id += 1
    return out


def summary(task_list):
    """Ground truth of what kernel_details.csv will hold: per kernel name its
    type, count, total and mean µs, by total duration (largest first)."""
    by = {}
    for t in task_list:
        e = by.setdefault(t["name"], {"name": t["name"], "type": t["type"], "core": t["core"], "count": 0,
                                      "total_us": 0.0})
        e["count"] += 1
        e["total_us"] += t["dur_us"]
    rows = sorted(by.values(), key=lambda e: (-e["total_us"], e["name"]))
    for e in rows:
        e["total_us"] = round(e["total_us"], 3)
        e["mean_us"] = round(e["total_us"] / e["count"], 3)
    return rows
