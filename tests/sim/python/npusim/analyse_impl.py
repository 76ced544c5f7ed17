"""torch_npu.profiler.profiler.analyse() for the simulator: materialise
ASCEND_PROFILER_OUTPUT/{kernel_details.csv, trace_view.json, ...} from the
raw data a simulated rank left in its *_ascend_pt directory.

analyse(root, max_process_number=N) parses up to N directories at once
(default 1 here, so one call of a root takes the sum of its ranks' times).
One directory takes delays.analyse + delays.analyse_per_mb x its raw MB
(everything in it but ASCEND_PROFILER_OUTPUT/), the writing of its outputs
included (they appear at the end, all at once), and holds
analyse.peak_mb_per_mb x its raw MB of the host's memory meanwhile: with
host.mem_available_mb set, a directory whose claim does not fit beside the
others' (host_view.Claims) is killed out of memory (SIGKILL of the whole
process, exit 137, no outputs), as the real one would be. Each directory's
start and end land in state/timeline.jsonl ("analyse", with raw_mb,
peak_mb, oom)."""
import concurrent.futures
import datetime
import glob
import json
import os
import shutil
import signal
import threading
import time

from . import bulk_rows, host_view, operator_memory_model, sim_clock, sim_root, work_timeline

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


def _bulk_kernel_lines(path, header_cols, out):
    """Writes the bulk rows of path (bulk_rows.py) as kernel_details.csv lines: each
    template's line is formatted once, split at its start time. -> (header, rows)."""
    header, f = bulk_rows.read(path)
    with f:
        formats = {False: _row_format(header_cols, "0"), True: _row_format(header_cols, "N/A")}
        parts = []
        for t in header["templates"]:
            hccl = t["core"] == "HCCL"
            values = list(_kernel_values(t, hccl))
            values[_KERNEL_FIELDS.index("Start Time(us)")] = '"\x00\t"'
            pre, post = formats[hccl].format(*values).split("\x00")
            parts.append((pre, post))
        buf = []
        for line in f:
            j, start, _pad = line.split(" ", 2)
            pre, post = parts[int(j)]
            buf.append(pre + start + post)
            if len(buf) >= 65536:
                out.writelines(buf)
                buf = []
        out.writelines(buf)
    return header


def _bulk_trace_events(paths, target_bytes, written):
    """Text of NPU events (", {...}") repeating the bulk rows' templates until about target_bytes in all."""
    chunks = []
    for path in paths:
        header, f = bulk_rows.read(path)
        f.close()
        tpl = header["templates"]
        if not tpl:
            continue
        hw = 800 + tpl[0]["device"]
        texts = [(', {"name": "%s", "pid": %d, "tid": 2, "ts": "%%.3f", "dur": %s, "args": {"Model Id": 4294967295, '
                  '"Task Type": "%s", "Stream Id": 2, "Task Id": %d}, "ph": "X"}') % (t["name"], hw, t["dur_us"],
                                                                                     t["core"], t["task_id"])
                 for t in tpl]
        k, period, i = len(tpl), header["period_us"], 0
        while written < target_bytes:
            batch = []
            for _ in range(4096):
                j = i % k
                batch.append(texts[j] % (tpl[j]["start_us"] + period * (1 + i // k)))
                i += 1
            text = "".join(batch)
            chunks.append(text)
            written += len(text)
        break
    return chunks


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


def record_invocation(path, export_type=None):
    rec = {"pid": os.getpid(), "ppid": os.getppid(), "time": sim_clock.now(), "path": path}
    if export_type is not None:
        rec["export_type"] = export_type  # as analyse() was given it; the outputs stay the text ones
    line = json.dumps(rec, separators=(",", ":")) + "\n"
    fd = os.open(os.path.join(path, INVOCATION_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def raw_bytes(path):
    """Bytes under a *_ascend_pt dir, ASCEND_PROFILER_OUTPUT/ (and outputs being written) left out (the raw
    data analyse() reads)."""
    total = 0
    for top, dirs, files in os.walk(path):
        if top == path:
            dirs[:] = [d for d in dirs if d != "ASCEND_PROFILER_OUTPUT" and not d.startswith(".sim_analyse_output.")]
        for n in files:
            try:
                total += os.lstat(os.path.join(top, n)).st_size
            except OSError:
                pass
    return total


def _oom_kill(path, t0, raw_mb, peak_mb, held_mb, limit_mb):
    _log("ERROR", "Killed: analysing %s needs %.1f MB beside the %.1f MB the other analyses hold, over the host's "
                  "%.1f MB available (out of memory)" % (path, peak_mb, held_mb, limit_mb))
    work_timeline.record("analyse", t0, sim_clock.now(), path=path, raw_mb=raw_mb, peak_mb=peak_mb, oom=True)
    os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer ends the whole process


def analyse_one(path, cfg, export_type=None):
    _log("INFO", "Start parsing profiling data in sync mode at: %s" % path)
    t0 = sim_clock.now()
    work_timeline.record_process_start("analyse_process_start", t0, path=path)
    record_invocation(path, export_type)
    raw_mb = round(raw_bytes(path) / float(1 << 20), 3)
    peak_mb = round(raw_mb * float((cfg.get("analyse") or {}).get("peak_mb_per_mb") or 0.0), 3)
    limit_mb = host_view.settings(cfg)["mem_available_mb"]
    root = sim_root.root_dir(required=False)
    claims, key = None, "%d-%d-%s" % (os.getpid(), threading.get_ident(), path)
    if peak_mb > 0 and limit_mb is not None and root:
        claims = host_view.Claims(root)
        fits, held = claims.claim(key, peak_mb, float(limit_mb))
        if not fits:
            _oom_kill(path, t0, raw_mb, peak_mb, held, float(limit_mb))
    try:
        _analyse_dir(path, cfg, t0, raw_mb)
    finally:
        if claims:
            claims.release(key)
    work_timeline.record("analyse", t0, sim_clock.now(), path=path, raw_mb=raw_mb, peak_mb=peak_mb, oom=False,
                         kernel_rows=_rows_of(path))


def _rows_of(path):
    try:
        with open(os.path.join(path, "ASCEND_PROFILER_OUTPUT", "analyse.done")) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _analyse_dir(path, cfg, t0, raw_mb):
    """delays.analyse(_per_mb) is the whole of a directory's analyse(), the
    writing of its outputs included (the real one takes minutes on big
    traces, its writing part of them): the outputs are written into a
    hidden directory first, the rest of the delay is waited, and only then
    do they appear as ASCEND_PROFILER_OUTPUT/ (nothing of it before)."""
    delay = sim_root.delay(cfg, "analyse", 0.0) + sim_root.delay(cfg, "analyse_per_mb", 0.0) * raw_mb
    begun = sim_clock.now()  # the delay counts from here, after the invocation's record (as the sleep did)
    final = os.path.join(path, "ASCEND_PROFILER_OUTPUT")
    out = os.path.join(path, ".sim_analyse_output.%d.%d" % (os.getpid(), threading.get_ident()))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    try:
        rows = _write_outputs(path, cfg, t0, out)
        rest = delay - (sim_clock.now() - begun)
        if rest > 0:
            time.sleep(rest)
        shutil.rmtree(final, ignore_errors=True)
        os.rename(out, final)
        with open(os.path.join(final, "analyse.done"), "w") as f:
            f.write("%d\n" % rows)  # the kernel rows written (the timeline's kernel_rows), once the delay is over
    finally:
        shutil.rmtree(out, ignore_errors=True)
    _log("INFO", "All profiling data parsed in a total time of %s" % datetime.timedelta(seconds=sim_clock.now() - t0))


def _write_outputs(path, cfg, t0, out):
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
    bulk = bulk_rows.files(os.path.dirname(f) for f in device_task_files(path)) if tasks is not None else []
    rows = len(tasks or [])
    if tasks is not None:  # device data landed (a rank that ran no request: the header only)
        weights = [1] * len(tasks)
        with open(os.path.join(out, "kernel_details.csv"), "w") as f:
            f.write(",".join(header) + "\n")
            f.writelines(_kernel_lines(tasks, header))
            for b in bulk:  # real scale: the bulk rows after the requests' own
                h = _bulk_kernel_lines(b, header, f)
                rows += h["rows"]
                if len(h["templates"]) == len(tasks):
                    weights = [w + c for w, c in zip(weights, bulk_rows.counts(h))]
        with open(os.path.join(out, "op_statistic.csv"), "w") as f:
            f.write("Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n")
            types = {}
            for t, w in zip(tasks, weights):
                e = types.setdefault((t["type"], t["core"]), [0, 0.0, t["dur_us"], t["dur_us"]])
                e[0] += w
                e[1] += t["dur_us"] * w
                e[2] = min(e[2], t["dur_us"])
                e[3] = max(e[3], t["dur_us"])
            total = sum(e[1] for e in types.values()) or 1
            for (typ, core), (n, tot, lo, hi) in sorted(types.items()):  # no rows when no kernel ran
                f.write("%d,%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.2f\n" % (tasks[0]["device"], typ, core, n, tot,
                                                                    lo, tot / n, hi, 100 * tot / total))
    op_range = os.path.join(path, "FRAMEWORK", "torch.op_range")
    if os.path.isfile(op_range):
        ops = []
        with open(op_range) as f:
            for line in f:
                if line.strip():
                    ops.append(json.loads(line))
        pid = ops[0]["pid"] if ops else 0
        with open(os.path.join(out, "trace_view.json"), "w") as f:
            text = json.dumps(_trace(ops, tasks or [], pid), separators=(", ", ": "))  # dumps: the C encoder
            tv_mb = bulk_rows.settings(cfg)["trace_view_mb"]
            pad = _bulk_trace_events(bulk, float(tv_mb) * (1 << 20), len(text)) if tv_mb and bulk else []
            if pad and text.endswith("]") and len(text) > 2:
                f.write(text[:-1])
                f.writelines(pad)
                f.write("]")
            else:
                f.write(text)
        with open(os.path.join(out, "operator_details.csv"), "w") as f:
            f.write("Name,Input Shapes,Call Stack,Host Self Duration(us),Host Total Duration(us),"
                    "Device Self Duration(us),Device Total Duration(us),Device Self Duration With AICore(us),"
                    "Device Total Duration With AICore(us)\n")
            for op in ops:
                f.write('%s,"",,%.3f,%.3f,0,0,0,0\n' % (op["name"], op["dur"], op["dur"]))
    else:
        _log("WARNING", "Failed to parse framework data: torch.op_range not found in %s" % path)
    operator_memory_model.analyse(path, out)
    return rows


def _analyse_logged(d, cfg, export_type=None):
    try:
        analyse_one(d, cfg, export_type)
    except Exception as e:  # the real analyse() logs and never raises
        _log("ERROR", "Failed to parse profiling data %s: %s" % (d, e))


def analyse(profiler_path, max_process_number=None, export_type=None):
    try:
        cfg = sim_root.load_config()
    except (sim_root.SimError, OSError, ValueError):
        cfg = {}
    dirs = resolve(profiler_path)
    if not dirs:
        _log("ERROR", "Invalid profiling path: %s" % profiler_path)
        return
    try:
        n = max(1, int(max_process_number or 1))
    except (TypeError, ValueError):
        n = 1
    if n == 1 or len(dirs) == 1:
        for d in dirs:
            _analyse_logged(d, cfg, export_type)
        return
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(n, len(dirs))) as pool:
        list(pool.map(lambda d: _analyse_logged(d, cfg, export_type), dirs))
