"""`msprof --export=on`: turn the raw payloads of each PROF_* into
mindstudio_profiler_output/{npu_module_mem,npu_mem}_<YYYYmmddHHMMSS>.csv
(CANN 8.x layout, KB units, timestamps with 3 decimals and a trailing TAB)."""
import json
import os
import time

from . import msprof_raw, msprof_series, sim_clock
from .memory_plan import MODULE_IDS

MODULE_HEADER = "Device_id,Component,Timestamp(us),Total Reserved(KB),Device"
MEM_HEADER = "Device_id,event,ddr(KB),hbm(KB),memory(KB),timestamp(us)"


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def find_profs(output):
    output = os.path.abspath(output)
    if os.path.basename(output).startswith("PROF_"):
        return [output]
    try:
        names = sorted(os.listdir(output))
    except OSError:
        return []
    return [os.path.join(output, n) for n in names
            if n.startswith("PROF_") and os.path.isdir(os.path.join(output, n))]


def export_prof(prof, stamp=None, type_="text"):
    """Export one PROF dir; returns the list of files written."""
    stamp = stamp or sim_clock.strftime("%Y%m%d%H%M%S")
    outdir = os.path.join(prof, "mindstudio_profiler_output")
    os.makedirs(outdir, exist_ok=True)
    os.makedirs(os.path.join(prof, "mindstudio_profiler_log"), exist_ok=True)
    written = []
    if type_ == "db":
        p = os.path.join(prof, "msprof_%s.db" % stamp)
        open(p, "wb").close()
        return [p]
    module_rows, mem_rows, counters = [], [], []
    for dev in msprof_raw.prof_devices(prof):
        data = os.path.join(prof, "device_%d" % dev, "data")
        mod = _load(os.path.join(data, "npu_module_mem.data"))
        mem = _load(os.path.join(data, "npu_mem.data"))
        if mod:
            for t, (_t0, _t1, comps) in msprof_series.sample(mod["segments"], mod["freq"]):
                for comp, kb in comps.items():
                    module_rows.append((MODULE_IDS.get(comp, 99), comp, dev, t, kb))
        if mem:
            for i, (t, (_t0, _t1, app_kb, dev_kb)) in enumerate(msprof_series.sample(mem["segments"], mem["freq"])):
                mem_rows.append((t, dev, app_kb, dev_kb))
                if i % 10 == 0:
                    counters.append((t, dev, app_kb, dev_kb))
    if module_rows:
        module_rows.sort(key=lambda r: (r[0], r[2], r[3]))
        p = os.path.join(outdir, "npu_module_mem_%s.csv" % stamp)
        with open(p, "w") as f:
            f.write(MODULE_HEADER + "\n")
            for _mid, comp, dev, t, kb in module_rows:
                f.write("%d,%s,%.3f\t,%d,NPU:%d\n" % (dev, comp, t, kb, dev))
        written.append(p)
    if mem_rows:
        mem_rows.sort()
        p = os.path.join(outdir, "npu_mem_%s.csv" % stamp)
        with open(p, "w") as f:
            f.write(MEM_HEADER + "\n")
            for t, dev, app_kb, dev_kb in mem_rows:
                f.write("%d,APP,0,%d,%d,%.3f\t\n" % (dev, app_kb, app_kb, t))
                f.write("%d,Device,0,%d,%d,%.3f\t\n" % (dev, dev_kb, dev_kb, t))
        written.append(p)
    events = []
    for dev in msprof_raw.prof_devices(prof):
        pid = 2383960608 + dev
        events += [{"name": "process_name", "pid": pid, "tid": 0, "ph": "M", "args": {"name": "NPU MEM"}},
                   {"name": "process_labels", "pid": pid, "tid": 0, "ph": "M", "args": {"labels": "NPU %d" % dev}},
                   {"name": "process_sort_index", "pid": pid, "tid": 0, "ph": "M", "args": {"sort_index": 17}}]
    for t, dev, app_kb, dev_kb in counters:
        pid = 2383960608 + dev
        for name, kb in (("APP/HBM", app_kb), ("Device/HBM", dev_kb)):
            events.append({"name": name, "pid": pid, "tid": 0, "ts": "%.3f" % t, "ph": "C", "args": {"KB": float(kb)}})
    p = os.path.join(outdir, "msprof_%s.json" % stamp)
    with open(p, "w") as f:
        f.write(json.dumps(events, separators=(",", ":")))  # dumps: the C encoder (dump encodes in Python)
    written.append(p)
    with open(os.path.join(outdir, "README.txt"), "w") as f:
        f.write("Simulated msprof export. npu_module_mem_*.csv: component reserved memory (KB); "
                "npu_mem_*.csv: APP/Device memory (KB).\n")
    return written
