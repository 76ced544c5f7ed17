# npuprof's operator-memory digest, run on the target next to torch_npu's
# data (Python 3.8+, standard library only). Only what it prints crosses the
# link; the CSVs stay on the target.
#
#   python3 -c SRC digest ROOT MARKER_NAME BUDGET_MS FINAL TOP_N MAX_BYTES LIMIT LAUNCH_SCRIPT
#       For every *_ascend_pt directory directly under ROOT (at most 256, in
#       name order): start or attach analyse() (LAUNCH_SCRIPT run as
#       `sh -c LAUNCH_SCRIPT npuprof-analyse DIR DIR/MARKER_NAME`, the marker
#       protocol of workers/profiling/remote_analyse.h; none started when
#       empty), at most LIMIT at once (0: the limit is chosen here from the
#       target's means, see choose_limit), starting the next as one ends;
#       wait up to BUDGET_MS for every DIR/MARKER_NAME.rc (polls 10 ms
#       doubling to 500 ms). While one still runs or waits for its turn and
#       FINAL is 0, print {"v":1,"pending":[dirs],"analyse_limit":LIMIT_REC}.
#       Otherwise digest every directory's
#       ASCEND_PROFILER_OUTPUT/{memory_record.csv, operator_memory.csv} and
#       print {"v":1,"ranks":[...],"analyse_limit":LIMIT_REC} (ASCII JSON,
#       one line). LIMIT_REC = {"limit", "source": means|default|given,
#       "reason"}.
#   python3 operator_memory_digest.py rank DIR TOP_N MAX_BYTES
#       The digest of one directory's CSVs alone (the tests).
#   python3 operator_memory_digest.py limit CORES MEM_BYTES RANK_BYTES...
#       choose_limit's record for the given means ("-" for an unread value;
#       the tests hold it against torch-profile's rule).
#
# Per rank (docs/FORMATS.md#operator-memory-digest):
#   {"dir", "device_id" (int or null), "analyse_exit" (int or null),
#    "memory_record": FILE, "operator_memory": FILE,
#    "peak": null | {"timestamp_us","allocated_mb","reserved_mb","row"},
#    "window": null | {"first_us","last_us","max_reserved_mb","pta_rows"},
#    "operators": [{"name","size_kb","allocated_us","released_us" (null: not
#                   released in the window),"row"}]}
#   FILE = {"status": ok|missing|empty|truncated|not_utf8|too_large|bad_header|unreadable,
#           "problem": text, "bytes": int, "rows": int, "bad_rows": int}
# Rules: the peak is the PTA row of memory_record.csv with the largest
# Total Allocated(MB) (the first of equals); fragmentation at the peak is
# that row's Total Reserved(MB) minus its Total Allocated(MB). An operator
# holds memory at the peak when its Allocation Time(us) <= the peak's
# timestamp and its Release Time(us) is empty or later; the TOP_N largest
# (Size(KB), then the earlier row) are listed with their 1-based data row.
# Columns are matched by name; cells are trimmed of blanks and TABs; every
# file is read in binary, line by line, and decoded as strict UTF-8; a file
# above MAX_BYTES is not read ("too_large").
import csv
import glob
import heapq
import json
import math
import os
import subprocess
import sys
import time

MAX_DIRS = 256
# Free memory per byte of a rank's raw data that analyse() may need (Ascend's
# profiler guide): the factor of torch-profile's rule
# (statemachine/torch_profile_analyse_limit.h), which choose_limit repeats.
RAW_FACTOR = 20
# analyse()'s own outputs inside a rank directory: not raw data.
OUTPUT_NAMES = ("ASCEND_PROFILER_OUTPUT", "mindstudio_profiler_output")
MAX_NAME = 256
MAX_PROBLEM = 512
RECORD = "memory_record.csv"
OPERATOR = "operator_memory.csv"
RECORD_COLS = ("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Device Type")
OPERATOR_COLS = ("Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)")


class Bad(Exception):
    def __init__(self, status, problem):
        Exception.__init__(self, problem)
        self.status = status
        self.problem = problem


def _cells(line):
    if '"' not in line:
        return [c.strip(" \t\r\n") for c in line.split(",")]
    try:
        return [c.strip(" \t\r\n") for c in next(csv.reader([line]))]
    except (csv.Error, StopIteration):
        return None


def _num(cell):
    try:
        v = float(cell)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _device(cell):
    # "NPU:3" -> 3
    if cell.startswith("NPU:") and cell[4:].isdigit() and len(cell) < 12:
        return int(cell[4:])
    return None


def read_rows(path, needed, max_bytes, on_row):
    """Streams path's data rows to on_row(cells by column index, row number);
    -> the FILE record. Raises nothing."""
    rec = {"status": "ok", "bytes": 0, "rows": 0, "bad_rows": 0}
    try:
        size = os.path.getsize(path)
    except OSError:
        rec.update(status="missing", problem="%s does not exist" % os.path.basename(path))
        return rec, None
    rec["bytes"] = size
    if size > max_bytes:
        rec.update(status="too_large", problem="%s is %d bytes, above the %d-byte cap: not read"
                   % (os.path.basename(path), size, max_bytes))
        return rec, None
    if size == 0:
        rec.update(status="empty", problem="%s is empty" % os.path.basename(path))
        return rec, None
    index = None
    try:
        with open(path, "rb") as f:
            n = 0
            for raw in f:
                n += 1
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise Bad("not_utf8", "%s line %d is not UTF-8 (byte %d)" % (os.path.basename(path), n,
                                                                                 e.start))
                if n == 1:
                    if line.startswith("\ufeff"):
                        line = line[1:]
                    header = _cells(line) or []
                    missing = [c for c in needed if c not in header]
                    if missing:
                        raise Bad("bad_header", "%s has no column %s" % (os.path.basename(path),
                                                                         ", ".join(missing)))
                    index = {c: header.index(c) for c in needed}
                    width = len(header)
                    continue
                if not line.strip():
                    continue
                cells = _cells(line)
                if cells is None or len(cells) < width:
                    if not raw.endswith(b"\n"):
                        raise Bad("truncated", "%s ends inside data row %d (no newline, %d of %d cells)"
                                  % (os.path.basename(path), rec["rows"] + 1, len(cells or []), width))
                    rec["bad_rows"] += 1
                    continue
                rec["rows"] += 1
                if not on_row(cells, index, rec["rows"]):
                    rec["bad_rows"] += 1
    except Bad as b:
        rec.update(status=b.status, problem=b.problem[:MAX_PROBLEM])
        return rec, index
    except OSError as e:
        rec.update(status="unreadable", problem=("%s: %s" % (os.path.basename(path), e))[:MAX_PROBLEM])
        return rec, index
    if index is None:
        rec.update(status="empty", problem="%s has no header" % os.path.basename(path))
    elif rec["rows"] == 0:
        rec.update(status="empty", problem="%s has a header and no data rows" % os.path.basename(path))
    return rec, index


def digest_rank(d, top_n, max_bytes):
    out = {"dir": d[-4096:], "device_id": None, "peak": None, "window": None, "operators": []}
    base = os.path.join(d, "ASCEND_PROFILER_OUTPUT")
    st = {"peak": None, "first": None, "last": None, "max_res": None, "pta": 0, "dev": None}

    def on_record(c, ix, row):
        if c[ix["Component"]] != "PTA":
            return True
        t = _num(c[ix["Timestamp(us)"]])
        a = _num(c[ix["Total Allocated(MB)"]])
        r = _num(c[ix["Total Reserved(MB)"]])
        if t is None or a is None or r is None:
            return False
        st["pta"] += 1
        st["first"] = t if st["first"] is None else min(st["first"], t)
        st["last"] = t if st["last"] is None else max(st["last"], t)
        st["max_res"] = r if st["max_res"] is None else max(st["max_res"], r)
        if st["peak"] is None or a > st["peak"]["allocated_mb"]:
            st["peak"] = {"timestamp_us": t, "allocated_mb": a, "reserved_mb": r, "row": row}
        if st["dev"] is None:
            st["dev"] = _device(c[ix["Device Type"]])
        return True

    out["memory_record"], _ = read_rows(os.path.join(base, RECORD), RECORD_COLS, max_bytes, on_record)
    if out["memory_record"]["status"] == "ok" and st["pta"] == 0:
        out["memory_record"].update(status="empty", problem="memory_record.csv has no PTA row")
    if st["peak"] is not None and out["memory_record"]["status"] == "ok":
        out["peak"] = st["peak"]
        out["window"] = {"first_us": st["first"], "last_us": st["last"], "max_reserved_mb": st["max_res"],
                         "pta_rows": st["pta"]}
        out["device_id"] = st["dev"]
    if out["device_id"] is None:  # the memory record did not say: the rank's one device_<id> dir
        ids = sorted({n.rsplit("_", 1)[1] for n in glob.glob(os.path.join(glob.escape(d), "PROF_*", "device_*"))
                      if n.rsplit("_", 1)[1].isdigit()})
        if len(ids) == 1 and len(ids[0]) < 6:
            out["device_id"] = int(ids[0])
    peak_t = out["peak"]["timestamp_us"] if out["peak"] else None
    heap = []  # (size, -row, op): the top_n largest live at the peak

    def on_operator(c, ix, row):
        size = _num(c[ix["Size(KB)"]])
        at = _num(c[ix["Allocation Time(us)"]])
        rel_cell = c[ix["Release Time(us)"]]
        rel = _num(rel_cell) if rel_cell else None
        if size is None or at is None or (rel_cell and rel is None):
            return False
        if peak_t is None or at > peak_t or (rel is not None and rel <= peak_t) or size <= 0:
            return True
        op = {"name": c[ix["Name"]][:MAX_NAME], "size_kb": size, "allocated_us": at, "released_us": rel,
              "row": row}
        item = (size, -row, op)
        if len(heap) < top_n:
            heapq.heappush(heap, item)
        elif item[:2] > heap[0][:2]:
            heapq.heapreplace(heap, item)
        return True

    out["operator_memory"], _ = read_rows(os.path.join(base, OPERATOR), OPERATOR_COLS, max_bytes, on_operator)
    if out["operator_memory"]["status"] == "ok":
        out["operators"] = [op for _s, _r, op in sorted(heap, key=lambda i: (-i[0], -i[1]))]
    return out


def read_rc(marker):
    try:
        with open(marker + ".rc") as f:
            return int(f.read().strip() or "-1")
    except (OSError, ValueError):
        return None


def alive(marker):
    try:
        with open(marker + ".pid") as f:
            os.kill(int(f.read().strip()), 0)
        return True
    except (OSError, ValueError):
        return False


def raw_bytes(d):
    """The bytes a rank directory holds outside analyse()'s outputs (du's
    blocks; symlinks not followed) -> int, or None when unreadable."""
    total = 0
    try:
        for top, dirs, files in os.walk(d, onerror=None):
            dirs[:] = [n for n in dirs if n not in OUTPUT_NAMES]
            for n in files + dirs:
                try:
                    total += os.lstat(os.path.join(top, n)).st_blocks * 512
                except OSError:
                    pass
    except OSError:
        return None
    return total


def target_means(dirs):
    """-> (cores, MemAvailable bytes, [raw bytes per dir]); None for what could not be read."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    mem = None
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    parts = line.split()
                    if len(parts) >= 2 and parts[1].isdigit() and len(parts[1]) < 16:
                        mem = int(parts[1]) * 1024
                    break
    except OSError:
        pass
    return cores, mem, [raw_bytes(d) for d in dirs]


def _mib(b):
    return "%.1f MiB" % (b / 1048576.0)


def choose_limit(cores, mem, sizes):
    """How many analyse() at once: torch-profile's rule,
    max(1, min(cores, MemAvailable / (20 x the largest rank's raw bytes), ranks));
    1 when a means could not be read."""
    missing = []
    if not cores or cores < 1:
        missing.append("the core count")
    if mem is None:
        missing.append("MemAvailable (/proc/meminfo)")
    if not sizes or any(s is None for s in sizes):
        missing.append("the rank dirs' sizes")
    if missing:
        return {"limit": 1, "source": "default",
                "reason": "%s could not be read: 1 at a time (the safe default)" % ", ".join(missing)}
    largest = max(sizes)
    each = RAW_FACTOR * largest
    by_memory = mem // each if each > 0 else cores
    limit = max(1, min(cores, by_memory, len(sizes)))
    return {"limit": limit, "source": "means",
            "reason": "%d core(s), %s available, largest rank %s raw x%d: %d at a time"
                      % (cores, _mib(mem), _mib(largest), RAW_FACTOR, limit)}


def digest(root, marker_name, budget_ms, final, top_n, max_bytes, limit, launch):
    dirs = sorted(p for p in glob.glob(os.path.join(glob.escape(root), "*_ascend_pt")) if os.path.isdir(p))
    dirs = dirs[:MAX_DIRS]
    if limit > 0:
        limit_rec = {"limit": limit, "source": "given", "reason": "chosen by the task's first call"}
    else:
        limit_rec = choose_limit(*target_means(dirs))
    exits = {}

    def marker(d):
        return os.path.join(d, marker_name)

    def started(d):
        return os.path.exists(marker(d) + ".pid") or os.path.exists(marker(d) + ".rc")

    def start_more():
        running = sum(1 for d in dirs if d not in exits and read_rc(marker(d)) is None and alive(marker(d)))
        for d in dirs:
            if running >= limit_rec["limit"]:
                return
            if d in exits or started(d):
                continue
            p = subprocess.run(["sh", "-c", launch, "npuprof-analyse", d, marker(d)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if p.returncode != 0:
                exits[d] = {"launch_exit": p.returncode,
                            "problem": p.stderr[-400:].decode("utf-8", "replace")}
            else:
                running += 1

    deadline = time.monotonic() + budget_ms / 1000.0
    pause = 0.01
    while True:
        if launch:
            start_more()
        waiting = [d for d in dirs if d not in exits and read_rc(marker(d)) is None
                   and (alive(marker(d)) or (launch and not started(d)))]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.5)
    if waiting and not final:
        return {"v": 1, "pending": [w[-4096:] for w in waiting], "analyse_limit": limit_rec}
    ranks = []
    for d in dirs:
        r = digest_rank(d, top_n, max_bytes)
        r["analyse_exit"] = read_rc(marker(d))
        if d in exits:
            r["analyse_problem"] = ("could not start analyse(): exit %d: %s"
                                    % (exits[d]["launch_exit"], exits[d]["problem"]))[:MAX_PROBLEM]
        elif d in waiting:
            r["analyse_problem"] = ("analyse() had not finished when the wait ended" if started(d) else
                                    "analyse() had not started when the wait ended (%d at a time)"
                                    % limit_rec["limit"])
        ranks.append(r)
    return {"v": 1, "ranks": ranks, "analyse_limit": limit_rec}


def _print(out):
    sys.stdout.write(json.dumps(out, ensure_ascii=True, separators=(",", ":"), allow_nan=False) + "\n")


def _means_arg(a):
    return None if a == "-" else int(a)


def main(argv):
    if len(argv) == 9 and argv[0] == "digest":
        _print(digest(argv[1], argv[2], int(argv[3]), argv[4] == "1", max(1, min(100, int(argv[5]))),
                      int(argv[6]), max(0, min(MAX_DIRS, int(argv[7]))), argv[8]))
        return 0
    if len(argv) == 4 and argv[0] == "rank":
        _print(digest_rank(argv[1], max(1, min(100, int(argv[2]))), int(argv[3])))
        return 0
    if len(argv) >= 3 and argv[0] == "limit":
        _print(choose_limit(_means_arg(argv[1]), _means_arg(argv[2]), [_means_arg(a) for a in argv[3:]]))
        return 0
    sys.stderr.write("usage: operator_memory_digest.py digest ROOT MARKER_NAME BUDGET_MS FINAL TOP_N MAX_BYTES "
                     "LIMIT LAUNCH\n       operator_memory_digest.py rank DIR TOP_N MAX_BYTES\n"
                     "       operator_memory_digest.py limit CORES MEM_BYTES RANK_BYTES...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
