"""HBM of one rank's device at each level of a service's life, from its
memory plan: what npu-smi shows (device MB, integers), what msprof's npu_mem
APP series shows (the process's own HBM) and which component reservations
npu_module_mem lists. One source for npu-smi and the msprof series, so a
curve and a snapshot taken at the same moment agree.

Levels, in the order a service passes them:
  base     before the service holds anything (and again after its ranks exit)
  loaded   weights loaded (+ HCCL, RUNTIME, SLOG and the other components)
  profile  vLLM's memory-profiling forward pass: loaded + activation peak
  kv       KV cache allocated (activation given back): loaded + KV cache
  ready    graphs captured, serving: everything but activation
  inferred a request is running (or ran and the allocator kept its activation)
"""

LEVELS = ("base", "loaded", "profile", "kv", "ready", "inferred")
NAMED = ("SLOG", "HCCL", "RUNTIME")


def levels(rank):
    """-> {"hbm_levels_mb": {level: device MB}, "app_levels_mb": {level: APP MB}} for one plan rank."""
    c = rank["components_mb"]
    s = rank["npu_smi"]
    kb = rank["msprof_components_kb"]
    others = sum(v for k, v in kb.items() if k not in NAMED) / 1024.0
    resid_ready = s["after_ready_mb"] - (c["fixed"] + c["weights"] + c["kv_cache"] + c["graph_capture"]
                                         + c["hccl"] + c["runtime"] + c["slog"] + others)
    act = c["activation_peak"]
    app_ready = c["weights"] + c["kv_cache"] + c["graph_capture"] + resid_ready
    app = {"base": 0.0, "loaded": c["weights"], "profile": c["weights"] + act,
           "kv": c["weights"] + c["kv_cache"], "ready": app_ready, "inferred": app_ready + act}
    dev = {"base": s["baseline_mb"], "loaded": s["after_loaded_mb"], "profile": s["after_loaded_mb"] + int(act),
           "kv": s["after_kv_mb"], "ready": s["after_ready_mb"], "inferred": s["inference_peak_mb"]}
    return {"hbm_levels_mb": dev, "app_levels_mb": app}


def modules(rank, level):
    """Component reservations (KB) msprof's npu_module_mem sees at `level`:
    only the runtime's own start-up share before weights load / after exit."""
    kb = rank["msprof_components_kb"]
    if level == "base":
        return {"SLOG": kb["SLOG"], "RUNTIME": kb["RUNTIME"] // 2}
    return dict(kb)


def delta_mb(rank):
    """npu-smi's per-level increase over the device's level before the service."""
    dev = rank["hbm_levels_mb"]
    return {k: v - dev["base"] for k, v in dev.items()}
