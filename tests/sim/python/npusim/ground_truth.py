"""The ground-truth record of one simulated vLLM instance
(state/truth/<instance>.json; format in README.md "Memory model and ground truth")."""

RANK_KEYS = ("rank", "dp_rank", "tp_rank", "device", "npu_id", "chip", "hbm_total_mb", "components_mb",
             "msprof_components_kb", "msprof_app_peak_kb", "printed", "npu_smi", "kv_budget", "hbm_levels_mb",
             "app_levels_mb")


def truth_doc(svc, devices, mode):
    """svc: the serve_main.Service whose memory plan is made."""
    a = svc.args
    p = svc.plan
    w = p["weights"]
    return {"schema": 1, "instance": svc.instance, "created_at": svc.started, "entry": svc.entry,
            "model": svc.model, "served_model_name": svc.served_name, "tp": svc.tp, "dp": svc.dp,
            "ep": w["ep"], "expert_parallel": bool(a.enable_expert_parallel),
            "enforce_eager": bool(a.enforce_eager), "cudagraph_mode": mode, "log_style": svc.style,
            "gpu_memory_utilization": a.gpu_memory_utilization, "max_model_len": svc.max_model_len,
            "port": a.port, "argv": list(getattr(a, "raw_argv", None) or []),  # as vLLM got it
            # --profiler-config as vLLM parsed it (null without one): what its profiler was configured with
            "profiler_config": getattr(a, "profiler_config", None),
            "main_pid": svc.pid, "rank_pids": [], "devices": [d["index"] for d in devices],
            "msprof_output": svc.msprof["output"] if svc.msprof else None,
            "profiler_dir": svc.profiler_dir if svc.profiler_enabled else None,
            "hccl_buffsize_mb": p.get("hccl_buffsize_mb"), "kv_cache_memory_bytes": p.get("kv_cache_memory_bytes"),
            "kv_cache_tokens": p["kv_cache_tokens"], "num_gpu_blocks": p["num_gpu_blocks"],
            "block_size": p["block_size"], "kv_bytes_per_token": p["kv_bytes_per_token"],
            "weights": {"total_bytes": w["total_bytes"], "per_device_bytes": w["per_device_bytes"],
                        "per_device_mb": p["weights_mb"], "tp": w["tp"], "dp": w["dp"], "ep": w["ep"],
                        "by_category": w["by_category"]},
            "activation_mode": p["activation_mode"],
            "per_device": {str(r["device"]): {k: r[k] for k in RANK_KEYS} for r in p["ranks"]},
            "requests": 0, "profile_dirs": [], "phases": [], "requests_log": [], "profile_sessions": [],
            "msprof_series": None}
