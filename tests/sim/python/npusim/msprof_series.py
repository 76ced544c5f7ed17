"""What msprof's memory sampling saw for each rank of an instance: per phase
of the instance's timeline, the APP and Device HBM (npu_mem) and the
component reservations (npu_module_mem), written as raw payloads into the
rank's PROF_* dir for `msprof --export` to sample."""
from . import msprof_raw

NAMED = ("SLOG", "HCCL", "RUNTIME")


def phase_values(rank):
    """-> (app_mb by phase, device_mb by phase) for one plan rank."""
    c = rank["components_mb"]
    s = rank["npu_smi"]
    kb = rank["msprof_components_kb"]
    others = sum(v for k, v in kb.items() if k not in NAMED) / 1024.0
    resid_ready = s["after_ready_mb"] - (c["fixed"] + c["weights"] + c["kv_cache"] + c["graph_capture"]
                                         + c["hccl"] + c["runtime"] + c["slog"] + others)
    app = {"starting": 0.0, "loaded": c["weights"],
           "ready": c["weights"] + c["kv_cache"] + c["graph_capture"] + resid_ready}
    app["inferred"] = app["ready"] + c["activation_peak"]
    app["loaded-never-ready"] = app["loaded"]
    dev = {"starting": s["baseline_mb"], "loaded": s["after_loaded_mb"], "ready": s["after_ready_mb"],
           "inferred": s["after_inference_mb"], "loaded-never-ready": s["after_loaded_mb"]}
    return app, dev


def write(prof_dirs, plan, timeline, freq):
    """prof_dirs: rank -> PROF dir; timeline: [[t_us, phase], ..., [t_end_us, "end"]]."""
    for r in plan["ranks"]:
        prof = prof_dirs.get(r["rank"])
        if not prof:
            continue
        app, dev = phase_values(r)
        kb = r["msprof_components_kb"]
        mem, mod = [], []
        for (t0, ph), (t1, _) in zip(timeline, timeline[1:]):
            if ph not in app:
                continue
            mem.append([t0, t1, int(round(app[ph] * 1024)), int(round(dev[ph] * 1024))])
            comps = dict(kb) if ph != "starting" else {"SLOG": kb["SLOG"], "RUNTIME": kb["RUNTIME"] // 2}
            mod.append([t0, t1, comps])
        msprof_raw.write_memory(prof, r["device"], freq, mem, mod)
