"""The true HBM budget of one simulated vLLM instance, per device.

Every component is chosen so that what the logs print (2-decimal GiB for KV
cache and graph capture, 4-decimal GiB for weights) and what msprof writes
(integer KB) equal the truth, and npu-smi's integer MB totals are the exact
sum of the components plus a small truly-unattributed residual."""
import json
import math
import os

from . import hbm_levels, safetensors_io, weight_shard

MIB = 1024 * 1024
GIB = 1024 * MIB
BLOCK_SIZE = 128
OTHER_REPORT_THRESHOLD_MB = 0.5

DEFAULT_MEMORY = {
    "hccl_kb": None,            # None: the HCCL model below (612000 KB at the default HCCL_BUFFSIZE); a number forces it
    "hccl_buffers": 2,          # HCCL buffers of HCCL_BUFFSIZE MB per device
    "runtime_kb": 128307,       # ~125.3 MB
    "slog_kb": 6144,            # 6 MB
    "other_kb": {"FMK": 3200, "DEVMM": 256, "DRV": 0},
    "activation_mb": 180,
    "residual_mb": 37,
    "graph_gib": {"default": 0.49, "PIECEWISE": 0.16, "FULL_DECODE_ONLY": 0.49, "FULL": 0.62,
                  "FULL_AND_PIECEWISE": 0.64},
    "kv_cache_gib": None,       # force a value (2 decimals); None = derive from utilisation
    "weights_extra_mb": 0.0,    # added to what vLLM measures for weights (e.g. workspace)
    "activation_release": False,  # True: the allocator gives activation memory back after each request
}

# HCCL's HBM per device: a fixed part plus hccl_buffers x HCCL_BUFFSIZE MB
# (HCCL_BUFFSIZE: the MB of each buffer HCCL allocates per communication
# domain; 200 when unset). At the default: 202400 + 2 x 200 x 1024 = 612000 KB.
HCCL_FIXED_KB = 202400
HCCL_DEFAULT_BUFFSIZE_MB = 200


def hccl_kb(m, buffsize_mb):
    """HCCL KB of one device for HCCL_BUFFSIZE `buffsize_mb` (None: unset)."""
    if m["hccl_kb"] is not None:
        return int(m["hccl_kb"])
    size = HCCL_DEFAULT_BUFFSIZE_MB if buffsize_mb is None else int(buffsize_mb)
    return HCCL_FIXED_KB + int(m["hccl_buffers"]) * size * 1024


# msprof module ids (slog module table) for row ordering.
MODULE_IDS = {"SLOG": 0, "IDEDD": 1, "SCC": 2, "HCCL": 3, "FMK": 4, "CCU": 5, "DVPP": 6, "RUNTIME": 7,
              "CCE": 8, "HDC": 9, "DRV": 10, "NET": 11, "DEVMM": 22, "KERNEL": 23, "APP": 33,
              "TS": 34, "AICPU": 36, "GE": 45, "ASCENDCL": 48}


def memory_settings(cfg):
    m = dict(DEFAULT_MEMORY)
    m.update(cfg.get("memory", {}))
    g = dict(DEFAULT_MEMORY["graph_gib"])
    g.update(cfg.get("memory", {}).get("graph_gib", {}) if isinstance(cfg.get("memory", {}).get("graph_gib"), dict) else {})
    if isinstance(cfg.get("memory", {}).get("graph_gib"), (int, float)):
        g = {k: cfg["memory"]["graph_gib"] for k in g}
    m["graph_gib"] = g
    return m


def load_model_config(model_dir):
    try:
        with open(os.path.join(model_dir, "config.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def kv_bytes_per_token(mc, tp):
    """Per-rank KV bytes per token: vLLM's cache dtype "auto" is the model's
    (4 bytes a value for a float32 model, else 2)."""
    size = 4 if mc.get("torch_dtype") == "float32" else 2
    layers = mc.get("num_hidden_layers", 1)
    if mc.get("layer_types"):
        layers = sum(1 for t in mc["layer_types"] if t == "full_attention") or 1
    if mc.get("kv_lora_rank"):
        return (mc["kv_lora_rank"] + mc.get("qk_rope_head_dim", 64)) * layers * size
    heads = mc.get("num_attention_heads", 8)
    kvh = mc.get("num_key_value_heads", heads)
    hd = mc.get("head_dim") or mc.get("hidden_size", 1024) // heads
    return 2 * layers * max(1, kvh // tp) * hd * size


class NoKvRoom(ValueError):
    """vLLM's refusal when the KV budget is not positive; kv_gib is what it
    logged first ("Available KV cache memory: <kv_gib> GiB", may be < 0)."""

    def __init__(self, kv_gib):
        ValueError.__init__(self, "No available memory for the cache blocks. Try increasing "
                            "`gpu_memory_utilization` when initializing the engine.")
        self.kv_gib = kv_gib


def centi_floor(x):
    return int(math.floor(x * 100 + 1e-9))


def busy_mb(cfg, index):
    """HBM other processes (--busy) hold on device `index`."""
    return sum(b["mb"] for b in cfg.get("busy", []) if b["device"] == index)


def plan(cfg, model_dir, devices, tp, dp, expert_parallel, util, max_model_len,
         enforce_eager, cudagraph_mode, rank_offset=0, hccl_buffsize_mb=None, kv_cache_memory_bytes=None):
    """devices: config device dicts, one per local rank (rank order); dp: the whole deployment's
    data-parallel size (EP = tp x dp); rank_offset: the world rank of the first device (a node of a
    multi-node deployment holds ranks start_rank*tp ..); hccl_buffsize_mb: the service's
    HCCL_BUFFSIZE (None: unset); kv_cache_memory_bytes: vLLM's --kv-cache-memory (None: the
    KV cache follows the utilisation).
    Returns the plan; raises ValueError(msg) when vLLM would refuse to start.

    KV cache follows vLLM(-ascend)'s own budget: total x utilisation minus
    everything already used at the profiling peak (what the device held
    before the service, incl. other processes, + weights + activation peak
    + non-torch allocations), floored to 0.01 GiB; with --kv-cache-memory it is
    exactly that many bytes (vLLM skips the budget)."""
    m = memory_settings(cfg)
    release = bool(m["activation_release"])
    tensors = safetensors_io.model_tensors(model_dir)
    if not tensors:
        raise FileNotFoundError("No model weights found in %s" % model_dir)
    w = weight_shard.per_device(tensors, tp, dp, expert_parallel)
    weights_mb = w["per_device_bytes"] / MIB + float(m["weights_extra_mb"])
    mc = load_model_config(model_dir)
    other_kb = {k: int(v) for k, v in m["other_kb"].items()}
    m["hccl_kb"] = hccl_kb(m, hccl_buffsize_mb)
    hccl_mb, runtime_mb, slog_mb = m["hccl_kb"] / 1024.0, m["runtime_kb"] / 1024.0, m["slog_kb"] / 1024.0
    other_all_mb = sum(other_kb.values()) / 1024.0
    other_rep_mb = sum(v / 1024.0 for v in other_kb.values() if v / 1024.0 > OTHER_REPORT_THRESHOLD_MB)
    act_mb = int(m["activation_mb"])
    graph_centi = 0 if enforce_eager else centi_floor(float(m["graph_gib"].get(cudagraph_mode or "default",
                                                                              m["graph_gib"]["default"])))
    graph_mb = graph_centi * 1024 / 100.0
    bpt = kv_bytes_per_token(mc, tp)
    ranks = []
    for r, dev in enumerate(devices, start=rank_offset):
        total = dev["total_mb"]
        base = dev["baseline_mb"] + busy_mb(cfg, dev["index"])
        non_torch = hccl_mb + runtime_mb + slog_mb + other_all_mb + m["residual_mb"]
        available = total * util - base - weights_mb - act_mb - non_torch
        if kv_cache_memory_bytes is not None:
            kv_bytes = int(kv_cache_memory_bytes)
            kv_centi = centi_floor(kv_bytes / float(GIB))
            kv_mb = kv_bytes / float(MIB)
        else:
            if m["kv_cache_gib"] is not None:
                kv_centi = centi_floor(float(m["kv_cache_gib"]))
            else:
                kv_centi = centi_floor(available / 1024.0)
            if kv_centi <= 0:
                raise NoKvRoom(kv_centi / 100.0)
            kv_bytes = kv_centi * GIB // 100
            kv_mb = kv_centi * 1024 / 100.0
        known = base + weights_mb + kv_mb + graph_mb + hccl_mb + runtime_mb + slog_mb + other_all_mb
        after_ready = int(round(known + m["residual_mb"]))
        after_loaded = int(round(base + weights_mb + hccl_mb + runtime_mb + slog_mb + other_all_mb))
        after_kv = int(round(base + weights_mb + hccl_mb + runtime_mb + slog_mb + other_all_mb + kv_mb))
        after_inf = after_ready + act_mb
        if after_inf > total:
            raise MemoryError("NPU out of memory. Tried to allocate %.2f GiB (NPU %d; %.2f GiB total capacity)"
                              % (kv_mb / 1024, dev["index"], total / 1024.0))
        reported_sum = (base + weights_mb + kv_mb + graph_mb + hccl_mb + runtime_mb + slog_mb
                        + other_rep_mb + act_mb)
        tokens = int(kv_bytes // (BLOCK_SIZE * bpt)) * BLOCK_SIZE
        app_mb = weights_mb + kv_mb + graph_mb + act_mb + (after_ready - known)
        rank = {
            "rank": r, "dp_rank": r // tp, "tp_rank": r % tp, "device": dev["index"],
            "npu_id": dev["npu_id"], "chip": dev["chip"], "hbm_total_mb": total,
            "components_mb": {
                "fixed": float(base), "weights": weights_mb, "kv_cache": kv_mb, "graph_capture": graph_mb,
                "hccl": hccl_mb, "runtime": runtime_mb, "slog": slog_mb, "msprof_other": other_rep_mb,
                "activation_peak": float(act_mb), "residual": after_inf - reported_sum,
            },
            "msprof_components_kb": dict({"SLOG": m["slog_kb"], "HCCL": m["hccl_kb"],
                                          "RUNTIME": m["runtime_kb"]}, **other_kb),
            "msprof_app_peak_kb": int(round(app_mb * 1024)),
            "printed": {"weights_gib": "%.4f" % (weights_mb / 1024.0), "kv_cache_gib": "%.2f" % (kv_centi / 100.0),
                        "graph_capture_gib": None if enforce_eager else "%.2f" % (graph_centi / 100.0),
                        # vLLM's line for --kv-cache-memory (format_gib: round to 2 decimals)
                        "kv_manual": None if kv_cache_memory_bytes is None else {
                            "initial_free_gib": str(round((total - base) / 1024.0, 2)),
                            "reserved_gib": str(round(kv_bytes / float(GIB), 2))}},
            "kv_cache_tokens": tokens,
            "kv_budget": {"total_mb": total, "gpu_memory_utilization": util, "requested_mb": total * util,
                          "fixed_mb": float(base), "weights_mb": weights_mb, "activation_mb": float(act_mb),
                          "non_torch_mb": non_torch, "available_mb": available, "kv_cache_mb": kv_mb,
                          "forced": m["kv_cache_gib"] is not None, "kv_cache_memory_bytes": kv_cache_memory_bytes},
            "npu_smi": {"baseline_mb": base, "after_loaded_mb": after_loaded, "after_kv_mb": after_kv,
                        "after_ready_mb": after_ready, "inference_peak_mb": after_inf,
                        "after_inference_mb": after_ready if release else after_inf},
        }
        rank.update(hbm_levels.levels(rank))
        ranks.append(rank)
    tokens = min(r["kv_cache_tokens"] for r in ranks)
    return {"weights": w, "weights_mb": weights_mb, "kv_bytes_per_token": bpt, "block_size": BLOCK_SIZE,
            "kv_cache_tokens": tokens, "num_gpu_blocks": tokens // BLOCK_SIZE,
            "max_concurrency": tokens / float(max_model_len), "graph_centi": graph_centi,
            "activation_mb": act_mb, "activation_mode": "released" if release else "retained",
            "ranks": ranks, "model_config": mc, "hccl_buffsize_mb": hccl_buffsize_mb,
            "kv_cache_memory_bytes": kv_cache_memory_bytes}
