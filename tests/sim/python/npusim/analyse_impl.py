"""torch_npu.profiler.profiler.analyse() for the simulator: materialise
ASCEND_PROFILER_OUTPUT/{kernel_details.csv, trace_view.json, ...} from the
raw data a simulated rank left in its *_ascend_pt directory."""
import datetime
import glob
import json
import os
import shutil
import time

from . import sim_clock, sim_root, work_timeline

# One JSON line per analyse() of a directory, appended inside that directory
# when the invocation starts (so an invocation killed mid-way still counts).
INVOCATION_LOG = ".sim_analyse_invocations"

HEADER_BLOCKDIM = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),"
                   "Duration(us),Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,"
                   "Input Formats,Output Shapes,Output Data Types,Output Formats,Context ID,aicore_time(us),"
                   "aic_total_cycles,aic_mac_time(us),aic_mac_ratio,aic_scalar_time(us),aic_scalar_ratio,"
                   "aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,aic_fixpipe_time(us),"
                   "aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
                   "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,"
                   "aiv_mte3_time(us),aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)").split(",")
HEADER_BLOCKNUM = ["Device_id"] + [h.replace("Block Dim", "Block Num") for h in HEADER_BLOCKDIM]
HEADER_BLOCKNUM.insert(0, HEADER_BLOCKNUM.pop(HEADER_BLOCKNUM.index("Step Id")))


def _log(level, msg):
    print("[%s] [%s] [%d] profiler.py: %s" % (sim_clock.strftime("%Y-%m-%d %H:%M:%S"), level, os.getpid(), msg),
          flush=True)


def resolve(path):
    path = os.path.abspath(path)

    def is_pt(p):
        return os.path.isdir(os.path.join(p, "FRAMEWORK")) or bool(glob.glob(os.path.join(p, "PROF_*")))
    if is_pt(path):
        return [path]
    try:
        subs = sorted(os.path.join(path, n) for n in os.listdir(path))
    except OSError:
        return []
    return [p for p in subs if os.path.isdir(p) and is_pt(p)]


# The kernel_details.csv columns a task fills, in the order _kernel_values
# gives them; every other column holds 0 (an NPU kernel) or N/A (HCCL).
_KERNEL_FIELDS = ("Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
                  "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Block Num",
                  "Mix Block Dim", "Mix Block Num", "HF32 Eligible", "Input Shapes", "Input Data Types",
                  "Input Formats", "Output Shapes", "Output Data Types", "Output Formats", "Context ID",
                  "aicore_time(us)")


def _kernel_values(t, hccl):
    """One task's values of _KERNEL_FIELDS, in that order."""
    shapes = "N/A" if hccl else '"""4096,512"""'
    return (t.get("step", ""), t["device"], 4294967295, "N/A" if hccl else t["task_id"],
            "N/A" if hccl else t["stream"], t["name"], t["type"], "N/A" if hccl else "dynamic", t["core"],
            '"%.3f\t"' % t["start_us"], t["dur_us"], t["wait_us"], t["block"], t["block"], 0, 0,
            "N/A" if hccl else "NO", t.get("in_shapes", shapes), "DT_BF16", "ND", t.get("out_shapes", shapes),
            "DT_BF16", "ND", "N/A", round(t["dur_us"] * 0.97, 3))


def _row_format(header, other):
    """A str.format of one CSV line of header's columns: {i} for the i-th of
    _KERNEL_FIELDS, `other` for a column no task fills."""
    return ",".join("{%d}" % _KERNEL_FIELDS.index(h) if h in _KERNEL_FIELDS else other for h in header) + "\n"


def _kernel_lines(tasks, header):
    """kernel_details.csv's lines after the header, one per task (a format per
    core kind, built once: a row costs one format call)."""
    formats = {False: _row_format(header, "0"), True: _row_format(header, "N/A")}
    lines = []
    for t in tasks:
        hccl = t["core"] == "HCCL"
        lines.append(formats[hccl].format(*_kernel_values(t, hccl)))
    return lines


def _trace(ops, tasks, pid):
    ev = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "Python"}},
          {"ph": "M", "name": "process_labels", "pid": pid, "tid": 0, "args": {"labels": "CPU"}},
          {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": 0}},
          {"ph": "M", "name": "thread_name", "pid": pid, "tid": pid, "args": {"name": "Thread %d" % pid}}]
    for op in ops:
        ev.append({"ph": "X", "name": op["name"], "pid": op["pid"], "tid": op["tid"], "ts": "%.3f" % op["ts"],
                   "dur": op["dur"], "cat": "cpu_op", "args": {"Sequence number": -1, "Fwd thread id": 0}})
    if tasks:
        hw = 800 + tasks[0]["device"]
        ev += [{"name": "process_name", "pid": hw, "tid": 0, "args": {"name": "Ascend Hardware"}, "ph": "M"},
               {"name": "thread_name", "pid": hw, "tid": 2, "args": {"name": "Stream 2"}, "ph": "M"},
               {"name": "process_labels", "pid": hw, "tid": 0, "args": {"labels": "NPU"}, "ph": "M"}]
        for t in tasks:
            ev.append({"name": t["name"], "pid": hw, "tid": 2, "ts": "%.3f" % t["start_us"], "dur": t["dur_us"],
                       "args": {"Model Id": 4294967295, "Task Type": t["core"], "Stream Id": 2,
                                "Task Id": t["task_id"]}, "ph": "X"})
    return ev


def device_task_files(path):
    """The simulator's NPU task data of a *_ascend_pt dir: PROF_*/device_*/data/sim_tasks.json.slice_<n>
    (written in slices while the rank finalises), in slice order."""
    files = glob.glob(os.path.join(path, "PROF_*", "device_*", "data", "sim_tasks.json.slice_*"))

    def order(f):
        tail = f.rsplit("_", 1)[1]
        return (os.path.dirname(f), int(tail) if tail.isdigit() else 0)
    return sorted(files, key=order)


def record_invocation(path):
    line = json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "time": sim_clock.now(), "path": path},
                      separators=(",", ":")) + "\n"
    fd = os.open(os.path.join(path, INVOCATION_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def analyse_one(path, cfg):
    _log("INFO", "Start parsing profiling data in sync mode at: %s" % path)
    t0 = sim_clock.now()
    work_timeline.record_process_start("analyse_process_start", t0, path=path)
    record_invocation(path)
    delay = sim_root.delay(cfg, "analyse", 0.0)
    if delay > 0:
        time.sleep(delay)  # delays.analyse: the real analyse() takes minutes on big traces
    out = os.path.join(path, "ASCEND_PROFILER_OUTPUT")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    tasks = None
    if shutil.which("msprof") is None:
        _log("ERROR", "Export CANN Profiling data failed! 'msprof' command not found! Please check whether the "
                      "CANN toolkit environment is set.")
    else:
        for f in device_task_files(path):
            with open(f) as fh:
                tasks = (tasks or []) + json.load(fh)
        if tasks is None:
            _log("WARNING", "Can't find device data in %s, the CANN profiling data may be incomplete." % path)
    _log("INFO", "CANN profiling data parsed in a total time of %s" % datetime.timedelta(seconds=sim_clock.now() - t0))
    header = HEADER_BLOCKNUM if cfg.get("kernel_details_header") == "blocknum" else HEADER_BLOCKDIM
    if tasks is not None:  # device data landed (a rank that ran no request: the header only)
        with open(os.path.join(out, "kernel_details.csv"), "w") as f:
            f.write(",".join(header) + "\n")
            f.writelines(_kernel_lines(tasks, header))
        with open(os.path.join(out, "op_statistic.csv"), "w") as f:
            f.write("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n")
            types = {}
            for t in tasks:
                types.setdefault((t["type"], t["core"]), []).append(t["dur_us"])
            total = sum(sum(v) for v in types.values()) or 1
            for (typ, core), v in sorted(types.items()):  # no rows when no kernel ran
                f.write("%d,%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.2f\n" % (tasks[0]["device"], typ, core, len(v), sum(v),
                                                                    min(v), sum(v) / len(v), max(v),
                                                                    100 * sum(v) / total))
    op_range = os.path.join(path, "FRAMEWORK", "torch.op_range")
    if os.path.isfile(op_range):
        ops = []
        with open(op_range) as f:
            for line in f:
                if line.strip():
                    ops.append(json.loads(line))
        pid = ops[0]["pid"] if ops else 0
        with open(os.path.join(out, "trace_view.json"), "w") as f:
            f.write(json.dumps(_trace(ops, tasks or [], pid), separators=(", ", ": ")))  # dumps: the C encoder
        with open(os.path.join(out, "operator_details.csv"), "w") as f:
            f.write("Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),"
                    "Device Self Duration(us),Device Total Duration(us),Device Self Duration With AICore(us),"
                    "Device Total Duration With AICore(us)\n")
            for op in ops:
                f.write('%s,"",,%.3f,%.3f,0,0,0,0\n' % (op["name"], op["dur"], op["dur"]))
    else:
        _log("WARNING", "Failed to parse framework data: torch.op_range not found in %s" % path)
    open(os.path.join(out, "analyse.done"), "w").close()
    _log("INFO", "All profiling data parsed in a total time of %s" % datetime.timedelta(seconds=sim_clock.now() - t0))
    work_timeline.record("analyse", t0, sim_clock.now(), path=path, kernel_rows=len(tasks or []))


def analyse(profiler_path, max_process_number=None, export_type=None):
    del max_process_number, export_type
    try:
        cfg = sim_root.load_config()
    except (sim_root.SimError, OSError, ValueError):
        cfg = {}
    dirs = resolve(profiler_path)
    if not dirs:
        _log("ERROR", "Invalid profiling path: %s" % profiler_path)
        return
    for d in dirs:
        try:
            analyse_one(d, cfg)
        except Exception as e:  # the real analyse() logs and never raises
            _log("ERROR", "Failed to parse profiling data %s: %s" % (d, e))
