"""Write one `*_ascend_pt` directory per rank at /stop_profile, with the real
inner layout (profiler_info_<rank>.json, profiler_metadata.json, FRAMEWORK/,
PROF_*/host|device_<id>/data/, logs/). The simulator's raw inputs for
analyse() are FRAMEWORK/torch.op_range (JSON lines of CPU ops) and
PROF_*/device_<id>/data/sim_tasks.json (NPU tasks); a rank whose device data
did not land has an empty device_<id>/data/."""
import json
import os
import socket
import time

from . import msprof_raw

KERNELS = [  # name, type, accelerator core, base duration us, block dim
    ("aclnnMatmul_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", 180.0, 16),
    ("aclnnRmsNorm_RmsNormAiCore_RmsNorm", "RmsNorm", "AI_VECTOR_CORE", 6.5, 24),
    ("aclnnFusedInferAttentionScore_FusedInferAttentionScore", "FusedInferAttentionScore", "MIX_AIC", 95.0, 20),
    ("aclnnSwiGlu_SwiGluAiCore_SwiGlu", "SwiGlu", "AI_VECTOR_CORE", 12.0, 40),
]
ALLREDUCE = ("hcom_allReduce__123_0_1", "hcom_allReduce_", "HCCL", 45.0, 0)


def dir_name(naming, host, pid, rank, tp, t):
    stamp = msprof_raw.local_stamp(t)
    if naming == "rank":
        return "dp%d_pp0_tp%d_dcp0_ep%d_rank%d_%d_%s_ascend_pt" % (rank // tp, rank % tp, rank, rank, pid, stamp)
    return "%s_%d_%s_ascend_pt" % (host, pid, stamp)


def synth_tasks(requests, tp, device, max_steps=16):
    tasks = []
    task_id = 1000
    for req in requests:
        t = req["t_start"] * 1e6 + 500.0
        steps = max(1, min(req["completion_tokens"], max_steps))
        for step in range(steps):
            for name, typ, core, dur, block in KERNELS + ([ALLREDUCE] if tp > 1 else []):
                d = dur * (3.0 if step == 0 else 1.0) * (1.0 + (task_id % 7) / 50.0)
                tasks.append({"name": name, "type": typ, "core": core, "start_us": round(t, 3), "dur_us": round(d, 3),
                              "wait_us": 1.2 if step else 0.0, "block": block, "task_id": task_id, "stream": 2,
                              "step": 1, "device": device})
                t += d + 1.5
                task_id += 1
    return tasks


def cpu_ops(requests, pid):
    ops = []
    for req in requests:
        t = req["t_start"] * 1e6
        for name in ("aten::empty", "aten::matmul", "aten::add", "aten::copy_"):
            ops.append({"name": name, "pid": pid, "tid": pid, "ts": round(t, 3), "dur": 12.5})
            t += 20.0
    return ops


def write_rank(base_dir, rank, pid, device, tp, requests, t_start, naming="host", host=None,
               device_data=True, framework_ops=True, with_stack=False):
    host = host or socket.gethostname()
    now = time.time()
    path = os.path.join(base_dir, dir_name(naming, host, pid, rank, tp, t_start))
    os.makedirs(os.path.join(path, "FRAMEWORK"), exist_ok=True)
    os.makedirs(os.path.join(path, "logs"), exist_ok=True)
    info = {"config": {"common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                                         "schedule": {}, "record_shapes": False, "profile_memory": False,
                                         "with_stack": False, "with_flops": False, "with_modules": with_stack},
                       "experimental_config": {"_profiler_level": "Level1", "_aic_metrics": "PipeUtilization",
                                               "_export_type": ["text"], "_data_simplification": True}},
            "start_info": {"syscnt_enable": False, "freq": 100, "start_cnt": 0,
                           "start_monotonic": int(t_start * 1e9)},
            "end_info": {"collectionTimeEnd": int(now * 1e6), "MonotonicTimeEnd": int(now * 1e9)},
            "torch_npu_version": "2.5.1.post1", "cann_version": "8.2.RC1", "rank_id": rank}
    with open(os.path.join(path, "profiler_info_%d.json" % rank), "w") as f:
        json.dump(info, f, indent=4)
    with open(os.path.join(path, "profiler_metadata.json"), "w") as f:
        json.dump({"ENV_VARIABLES": {"ASCEND_RT_VISIBLE_DEVICES": os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "")}},
                  f, indent=4)
    for fname in ("torch.op_mark", "torch.memory_usage", "torch.gc_record"):
        open(os.path.join(path, "FRAMEWORK", fname), "w").close()
    if framework_ops:
        with open(os.path.join(path, "FRAMEWORK", "torch.op_range"), "w") as f:
            for op in cpu_ops(requests, pid):
                f.write(json.dumps(op) + "\n")
    prof = msprof_raw.create_prof(path, pid, [device], index=1, t=t_start + 0.005)
    if device_data:
        with open(os.path.join(prof, "device_%d" % device, "data", "sim_tasks.json"), "w") as f:
            json.dump(synth_tasks(requests, tp, device), f)
    msprof_raw.finish(prof)
    return path
