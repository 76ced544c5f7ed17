"""Real-scale device data of a rank (config `scale`): real captures hold
hundreds of thousands of kernel rows per rank, gigabytes of raw data. With
`scale.rows_per_rank` set, a rank's device data is brought up to that many
rows by repeating the kernels its requests ran (the templates), one cycle
after the other on the rank's timeline, written in bulk as text (no object
per row) so that a 400,000-row rank takes a second or two.

File: PROF_*/device_<id>/data/sim_tasks.bulk
  line 1: {"templates": [task, ...], "rows": N, "period_us": P}
  then N lines "<template index> <start µs> <padding>": row i repeats
  template i % K, (i // K) cycles of P µs after the template's own start.
  The padding brings each line to scale.raw_bytes_per_row bytes (a real raw
  record's size: what du of the rank dir then sees).

Config (`scale` in config.json), all default to today's behaviour:
  rows_per_rank      null  total kernel rows per rank (the requests' own count as part of it)
  rows_variation     0     per-rank spread: rank r gets rows x (1 + v x VARIATION[r % 7])
  raw_bytes_per_row  64    bytes per bulk line (>= 24)
  trace_view_mb      null  analyse() pads trace_view.json with NPU events of the bulk rows to about this size
"""
import json
import os

FILE = "sim_tasks.bulk"
VARIATION = (0.0, 1.0, -1.0, 0.5, -0.5, 0.25, -0.25)


def settings(cfg):
    s = cfg.get("scale") or {}
    return {"rows_per_rank": s.get("rows_per_rank"), "rows_variation": float(s.get("rows_variation") or 0.0),
            "raw_bytes_per_row": max(24, int(s.get("raw_bytes_per_row") or 64)),
            "trace_view_mb": s.get("trace_view_mb")}


def rows_for(cfg, rank):
    """The rank's total row count under scale.rows_per_rank (None: not set)."""
    s = settings(cfg)
    if not s["rows_per_rank"]:
        return None
    return max(0, int(round(int(s["rows_per_rank"]) * (1.0 + s["rows_variation"] * VARIATION[rank % 7]))))


def write(data_dir, templates, rows, raw_bytes_per_row=64):
    """Write `rows` bulk rows repeating `templates` (the rank's own tasks); nothing when either is empty."""
    if rows <= 0 or not templates:
        return None
    first = min(t["start_us"] for t in templates)
    last = max(t["start_us"] + t["dur_us"] for t in templates)
    period = round(last - first + 50.0, 3)
    path = os.path.join(data_dir, FILE)
    k = len(templates)
    starts = [t["start_us"] + period for t in templates]  # cycle 0 begins one period after the templates
    pad = "x" * max(0, raw_bytes_per_row - 24)
    with open(path, "w") as f:
        f.write(json.dumps({"templates": templates, "rows": rows, "period_us": period}) + "\n")
        cycle = 0
        done = 0
        while done < rows:
            n = min(k, rows - done)
            off = cycle * period
            f.write("".join(["%d %.3f %s\n" % (j, starts[j] + off, pad) for j in range(n)]))
            done += n
            cycle += 1
    return path


def files(device_data_dirs):
    return [os.path.join(d, FILE) for d in device_data_dirs if os.path.isfile(os.path.join(d, FILE))]


def read(path):
    """-> (header dict, open file positioned at the first row): the caller iterates lines and closes it."""
    f = open(path)
    header = json.loads(f.readline())
    return header, f


def counts(header):
    """How many rows repeat each template."""
    k = len(header["templates"])
    n = header["rows"]
    return [n // k + (1 if j < n % k else 0) for j in range(k)] if k else []


def summary(tasks, rows):
    """kernel_model.summary of the rank's tasks followed by `rows` bulk rows repeating them."""
    k = len(tasks)
    if not k or rows <= 0:
        return None
    by = {}
    for j, t in enumerate(tasks):
        c = 1 + rows // k + (1 if j < rows % k else 0)
        e = by.setdefault(t["name"], {"name": t["name"], "type": t["type"], "core": t["core"], "count": 0,
                                      "total_us": 0.0})
        e["count"] += c
        e["total_us"] += t["dur_us"] * c
    out = sorted(by.values(), key=lambda e: (-e["total_us"], e["name"]))
    for e in out:
        e["total_us"] = round(e["total_us"], 3)
        e["mean_us"] = round(e["total_us"] / e["count"], 3)
    return out


def last_end_us(tasks, rows):
    """The end of the last kernel once `rows` bulk rows follow the rank's tasks (write's timeline)."""
    k = len(tasks)
    period = round(max(t["start_us"] + t["dur_us"] for t in tasks) - min(t["start_us"] for t in tasks) + 50.0, 3)
    ends = [t["start_us"] + t["dur_us"] + period * (rows // k + (1 if j < rows % k else 0))
            for j, t in enumerate(tasks)]
    return round(max(ends), 3)
