"""What msprof's memory sampling saw for each rank of an instance over its
whole life (launch to exit): per phase, the APP and Device HBM (npu_mem)
and the component reservations (npu_module_mem), written as raw payloads
into the rank's PROF_* dir for `msprof --export` to sample; and the sampling
grid both sides share.

The sampler ticks on one fixed grid from the first phase on (period
1/freq, so a phase shorter than the period may fall between two samples,
as on the real device); runs longer than MAX_SAMPLES periods are sampled
more coarsely (step = duration / MAX_SAMPLES)."""
import bisect

from . import hbm_levels, msprof_raw

MAX_SAMPLES = 30000


def grid(t0, t1, freq):
    """Sample times (µs) in [t0, t1): t0 + k·step."""
    step = max(1e6 / max(freq, 1), (t1 - t0) / MAX_SAMPLES)
    n = max(1, int((t1 - t0) // step) + (1 if (t1 - t0) % step else 0))
    return [t0 + k * step for k in range(n)]


def sample(segments, freq):
    """segments: [[t0, t1, value...], ...] in time order, contiguous.
    -> [(t, segment)] on the shared grid."""
    if not segments:
        return []
    starts = [s[0] for s in segments]
    out = []
    for t in grid(segments[0][0], segments[-1][1], freq):
        i = bisect.bisect_right(starts, t) - 1
        out.append((t, segments[max(0, i)]))
    return out


def segments_of(entries):
    """[[t_us, phase, level], ..., [t_end, "end", level]] -> [(t0, t1, phase, level)], empty ones dropped."""
    return [(t0, t1, ph, lv) for (t0, ph, lv), (t1, _p, _l) in zip(entries, entries[1:]) if t1 > t0]


def write(prof_dirs, plan, entries, freq):
    """prof_dirs: rank -> PROF dir; entries: PhaseLog.series()."""
    segs = segments_of(entries)
    for r in plan["ranks"]:
        prof = prof_dirs.get(r["rank"])
        if not prof or not segs:
            continue
        app, dev = r["app_levels_mb"], r["hbm_levels_mb"]
        mem = [[t0, t1, int(round(app[lv] * 1024)), int(round(dev[lv] * 1024))] for t0, t1, _ph, lv in segs]
        mod = [[t0, t1, hbm_levels.modules(r, lv)] for t0, t1, _ph, lv in segs]
        msprof_raw.write_memory(prof, r["device"], freq, mem, mod)


def truth(entries, freq, windows):
    """What the sampler could see: sample count, grid, and samples inside each inference window
    (windows: [(start_s, end_s)], end None = still open at the end of the series)."""
    segs = segments_of(entries)
    if not segs:
        return None
    ts = grid(segs[0][0], segs[-1][1], freq)
    end = segs[-1][1]
    wins = []
    for a, b in windows:
        a_us, b_us = a * 1e6, (b * 1e6 if b is not None else end)
        wins.append({"start": a, "end": b, "samples": bisect.bisect_left(ts, b_us) - bisect.bisect_left(ts, a_us)})
    return {"freq_hz": freq, "period_us": (ts[1] - ts[0]) if len(ts) > 1 else 1e6 / max(freq, 1),
            "start_us": ts[0], "end_us": end, "samples": len(ts), "inference_windows": wins}
