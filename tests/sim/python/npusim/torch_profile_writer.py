"""One `*_ascend_pt` directory per rank after /stop_profile, with the real
inner layout (profiler_info_<rank>.json, profiler_metadata.json, FRAMEWORK/,
PROF_*/host|device_<id>/data/, logs/), written in three steps as torch_npu
does: begin (the directory and its skeleton, at stop), chunks of data
(FRAMEWORK/torch.op_range grows, device data lands in slices) and finish
(PROF end_info markers, then profiler_info_<rank>.json last: once it is
there the directory no longer changes until analyse()).

The simulator's raw inputs for analyse() are FRAMEWORK/torch.op_range (JSON
lines of CPU ops) and PROF_*/device_<id>/data/sim_tasks.json.slice_<n> (NPU
tasks, kernel_model.py), and at real scale PROF_*/device_<id>/data/sim_tasks.bulk
(bulk_rows.py); a rank whose device data did not land has an empty
device_<id>/data/."""
import json
import os
import socket

from . import bulk_rows, msprof_raw


def dir_name(naming, host, pid, rank, tp, t):
    stamp = msprof_raw.local_stamp(t)
    if naming == "rank":
        return "dp%d_pp0_tp%d_dcp0_ep%d_rank%d_%d_%s_ascend_pt" % (rank // tp, rank % tp, rank, rank, pid, stamp)
    return "%s_%d_%s_ascend_pt" % (host, pid, stamp)


def cpu_ops(requests, pid):
    ops = []
    for req in requests:
        t = req["t_start"] * 1e6
        for name in ("aten::empty", "aten::matmul", "aten::add", "aten::copy_"):
            ops.append({"name": name, "pid": pid, "tid": pid, "ts": round(t, 3), "dur": 12.5})
            t += 20.0
    return ops


def begin_rank(base_dir, rank, pid, device, tp, t_start, naming="host", host=None):
    """Create the rank's directory skeleton; -> trace dict for write_chunk/finish_rank."""
    host = host or socket.gethostname()
    path = os.path.join(base_dir, dir_name(naming, host, pid, rank, tp, t_start))
    os.makedirs(os.path.join(path, "FRAMEWORK"), exist_ok=True)
    os.makedirs(os.path.join(path, "logs"), exist_ok=True)
    with open(os.path.join(path, "profiler_metadata.json"), "w") as f:
        json.dump({"ENV_VARIABLES": {"ASCEND_RT_VISIBLE_DEVICES": os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "")}},
                  f, indent=4)
    for fname in ("torch.op_mark", "torch.memory_usage", "torch.gc_record"):
        open(os.path.join(path, "FRAMEWORK", fname), "w").close()
    prof = msprof_raw.create_prof(path, pid, [device], index=1, t=t_start + 0.005)
    return {"path": path, "prof": prof, "rank": rank, "device": device, "t_start": t_start, "chunks": 0}


def write_chunk(trace, ops, tasks, framework_ops=True, device_data=True):
    """Append one chunk of the rank's data (ops to torch.op_range, tasks as the next device slice)."""
    if framework_ops and ops:
        with open(os.path.join(trace["path"], "FRAMEWORK", "torch.op_range"), "a") as f:
            f.write("".join(json.dumps(op) + "\n" for op in ops))
    if device_data and (tasks or trace["chunks"] == 0):  # a rank that ran nothing still has its (empty) data
        data = os.path.join(trace["prof"], "device_%d" % trace["device"], "data")
        with open(os.path.join(data, "sim_tasks.json.slice_%d" % trace["chunks"]), "w") as f:
            f.write(json.dumps(tasks))  # dumps: the C encoder (dump encodes in Python)
    trace["chunks"] += 1


def write_bulk(trace, tasks, rows, raw_bytes_per_row=64):
    """Real-scale device data: `rows` more rows repeating the rank's tasks (bulk_rows.py)."""
    data = os.path.join(trace["prof"], "device_%d" % trace["device"], "data")
    return bulk_rows.write(data, tasks, rows, raw_bytes_per_row)


def finish_rank(trace, t_stop, with_stack=False):
    """The rank's finalise: PROF end_info, then profiler_info_<rank>.json."""
    msprof_raw.finish(trace["prof"])
    rank = trace["rank"]
    info = {"config": {"common_config": {"activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                                         "schedule": {}, "record_shapes": False, "profile_memory": False,
                                         "with_stack": False, "with_flops": False, "with_modules": with_stack},
                       "experimental_config": {"_profiler_level": "Level1", "_aic_metrics": "PipeUtilization",
                                               "_export_type": ["text"], "_data_simplification": True}},
            "start_info": {"syscnt_enable": False, "freq": 100, "start_cnt": 0,
                           "start_monotonic": int(trace["t_start"] * 1e9)},
            "end_info": {"collectionTimeEnd": int(t_stop * 1e6), "MonotonicTimeEnd": int(t_stop * 1e9)},
            "torch_npu_version": "2.5.1.post1", "cann_version": "8.2.RC1", "rank_id": rank}
    final = os.path.join(trace["path"], "profiler_info_%d.json" % rank)
    tmp = final + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f, indent=4)
    os.replace(tmp, final)
