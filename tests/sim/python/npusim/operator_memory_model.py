"""torch_npu's memory profiling (profile_memory=True; vLLM:
torch_profiler_with_memory) for the simulator: the operators of one rank's
profiled window, with known sizes and lifetimes, and what analyse() writes
from them into ASCEND_PROFILER_OUTPUT: operator_memory.csv and
memory_record.csv with the real headers.

plan() is the truth (recorded per rank in the truth record's
profile_sessions[].ranks[].operator_memory, README.md "Operator memory"):
  * a PTA base (the rank's weights + KV cache, integer KB) held all window;
  * one long-lived operator (aten::zeros, 3 MB, never released in the window);
  * PEAK_OPS: the activation of the inference, sized from the memory plan's
    activation_mb, allocated one after the other and all live at peak_at_us
    (the allocation of the last one), released right after;
  * `rows` small background operators (64..1023 KB, one live at a time)
    before and after the peak: they never hold the peak.
The PTA allocator reserves the running maximum of allocated memory plus
`fragmentation_mb`, so reserved - allocated at the peak is exactly that.
Config `operator_memory` (config.json): rows (default 3000),
fragmentation_mb (default 37.5 + rank), top_name (rename the largest op).
Rows are built as text in bulk (one format per row)."""
import json
import os

PEAK_OPS = (("npu::npu_fused_infer_attention_score", 0.34), ("aten::matmul", 0.22), ("aten::empty_strided", 0.17),
            ("npu::npu_rms_norm", 0.12), ("aten::cat", 0.09), ("aten::add", 0.06))
BG_NAMES = ("aten::empty", "aten::copy_", "aten::mul", "aten::view", "aten::slice")
LONG_OP = ("aten::zeros", 3 * 1024)
OPERATOR_HEADER = ("Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),"
                   "Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),"
                   "Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),"
                   "Release Total Active(MB),Stream Ptr,Device Type")
RECORD_HEADER = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,"
                 "Device Type")
STREAM = 187651234567890
HUGE_BYTES = 1100 << 20  # fault "huge": a sparse operator_memory.csv above the digest's 1 GiB cap
PLAN_FILE = "sim_operator_memory.json"  # in FRAMEWORK/: the plan analyse() writes the CSVs from


def settings(cfg):
    s = (cfg or {}).get("operator_memory") or {}
    return {"rows": max(0, int(s.get("rows", 3000))), "fragmentation_mb": s.get("fragmentation_mb"),
            "top_name": s.get("top_name")}


def plan(rank, device, t_start_us, t_stop_us, activation_mb, base_mb, cfg):
    s = settings(cfg)
    frag = float(s["fragmentation_mb"]) if s["fragmentation_mb"] is not None else 37.5 + rank
    frag_kb = int(round(frag * 1024))
    base_kb = int(round(base_mb * 1024))
    t0 = round(float(t_start_us), 3)
    span = max(float(t_stop_us) - t0, 20000.0)
    peak_ops = []
    for i, (name, frac) in enumerate(PEAK_OPS):
        if i == 0 and s["top_name"]:
            name = str(s["top_name"])
        peak_ops.append([name, max(1, int(round(activation_mb * 1024 * frac)))])
    k = len(peak_ops)
    peak_at = round(t0 + 0.6 * span, 3)
    ops = [(LONG_OP[0], LONG_OP[1], round(t0 + 1.0, 3), None)]
    for i, (name, kb) in enumerate(peak_ops):
        ops.append((name, kb, round(peak_at - 0.5 * (k - 1 - i), 3), round(peak_at + 0.5 * (i + 1), 3)))
    n = s["rows"]
    before = (t0 + 2.0, peak_at - 0.5 * k - 1.0)
    after = (peak_at + 0.5 * (k + 1) + 1.0, t0 + span)
    for j in range(n):
        lo, hi = before if j < n // 2 else after
        m = n // 2 if j < n // 2 else n - n // 2
        slot = (hi - lo) / max(1, m)
        a = lo + slot * (j if j < n // 2 else j - n // 2)
        ops.append((BG_NAMES[j % len(BG_NAMES)], 64 + (j * 37) % 960, round(a, 3), round(a + 0.4 * slot, 3)))
    live = [{"name": o[0], "size_kb": o[1], "allocated_us": o[2]} for o in ops[:k + 1]]
    live.sort(key=lambda o: -o["size_kb"])
    peak_alloc_kb = base_kb + sum(o["size_kb"] for o in live)
    return {"device": device, "base_kb": base_kb, "fragmentation_kb": frag_kb, "ops": ops,
            "truth": {"peak_at_us": peak_at, "peak_allocated_mb": peak_alloc_kb / 1024.0,
                      "peak_reserved_mb": (peak_alloc_kb + frag_kb) / 1024.0, "fragmentation_mb": frag_kb / 1024.0,
                      "top_operator": live[0]["name"], "top_size_kb": live[0]["size_kb"],
                      "top_size_mb": live[0]["size_kb"] / 1024.0, "peak_operators": live, "rows": len(ops)}}


def write_csvs(p, out_dir):
    """operator_memory.csv and memory_record.csv of plan p into out_dir."""
    dev = "NPU:%d" % p["device"]
    events = []  # (time, order, delta_kb, op index)
    for i, (_n, kb, a, r) in enumerate(p["ops"]):
        events.append((a, 1, kb, i))
        if r is not None:
            events.append((r, 0, -kb, i))
    events.sort()
    alloc = p["base_kb"]
    high = alloc
    frag = p["fragmentation_kb"]
    at_alloc, at_release = {}, {}
    rec = ["%s\n" % RECORD_HEADER]
    for t, _o, delta, i in events:
        alloc += delta
        high = max(high, alloc)
        a_mb, r_mb = alloc / 1024.0, (high + frag) / 1024.0
        (at_alloc if delta > 0 else at_release)[i] = (a_mb, r_mb)
        rec.append("PTA,%.3f\t,%r,%r,%r,%d,%s\n" % (t, a_mb, r_mb, a_mb, STREAM, dev))
        if len(rec) % 500 == 0:
            rec.append("APP,%.3f\t,,%r,,,%s\n" % (t, r_mb + 512.0, dev))
    opl = ["%s\n" % OPERATOR_HEADER]
    for i, (name, kb, a, r) in enumerate(p["ops"]):
        aa, ar = at_alloc[i]
        if r is None:
            opl.append("%s,%.2f,%.3f\t,,,,,%r,%r,%r,,,,%d,%s\n" % (name, kb, a, aa, ar, aa, STREAM, dev))
        else:
            ra, rr = at_release[i]
            opl.append("%s,%.2f,%.3f\t,%.3f\t,%.3f\t,%.3f,%.3f,%r,%r,%r,%r,%r,%r,%d,%s\n"
                       % (name, kb, a, r, r, r - a, r - a, aa, ar, aa, ra, rr, ra, STREAM, dev))
    with open(os.path.join(out_dir, "memory_record.csv"), "w") as f:
        f.writelines(rec)
    with open(os.path.join(out_dir, "operator_memory.csv"), "w") as f:
        f.writelines(opl)


FAULTS = ("missing", "empty", "truncated", "not_utf8", "huge")


def analyse(rank_dir, out_dir):
    """analyse()'s part: the CSVs of the plan the rank left in FRAMEWORK/ (none without one), then the
    rank's fault (faults.operator_memory_csv {"<rank>": one of FAULTS}) applied to operator_memory.csv."""
    try:
        with open(os.path.join(rank_dir, "FRAMEWORK", PLAN_FILE)) as f:
            p = json.load(f)
    except (OSError, ValueError):
        return
    write_csvs(p, out_dir)
    path = os.path.join(out_dir, "operator_memory.csv")
    fault = p.get("fault")
    if fault == "missing":
        os.unlink(path)
    elif fault == "empty":
        open(path, "w").close()
    elif fault == "truncated":
        with open(path, "rb+") as f:
            f.seek(0, 2)
            f.truncate(max(1, f.tell() - 40))
    elif fault == "not_utf8":
        with open(path, "ab") as f:
            f.write(b"aten::\xff\xfebad,12.00,1.000\t,,,,,1,1,1,,,,1,NPU:0\n")
    elif fault == "huge":
        with open(path, "rb+") as f:
            f.truncate(HUGE_BYTES)  # sparse: above the digest's cap without writing it
