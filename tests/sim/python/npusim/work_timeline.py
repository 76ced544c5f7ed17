"""The target's own work, one JSON line per finished piece, in
state/timeline.jsonl: service start-up, each request, profiler control,
torch_npu finalise, msprof flush and export, analyse(), service shutdown,
and each tool's own process start (the interpreter and imports before the
tool does anything: "npu_smi" for a whole npu-smi call, "*_process_start"
for the others), which a real tool pays too.

A benchmark subtracts the union of these intervals from npuprof's wall time
to get npuprof's own overhead. Lines are appended with O_APPEND (one write
per line), so several processes can log at once; pieces may overlap
(concurrent requests), a piece that never finished (killed, hung) has no
line. Times are the target's clock (unix seconds)."""
import json
import os
import time

from . import sim_clock, sim_root

FILE = "timeline.jsonl"


def path(root):
    return os.path.join(sim_root.state_dir(root), FILE)


def record(what, start, end, root=None, **fields):
    """Append one piece; never raises (the log must not break the tool)."""
    root = root or sim_root.root_dir(required=False)
    if not root:
        return
    line = {"what": what, "start": round(start, 6), "end": round(end, 6), "dur_s": round(end - start, 6),
            "pid": os.getpid()}
    line.update(fields)
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    try:
        fd = os.open(path(root), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError:
        pass


def read(root):
    """All pieces logged so far (a torn last line is skipped)."""
    out = []
    try:
        with open(path(root)) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        pass
    return out


def process_start_time():
    """Unix time at which this process was forked (an exec keeps the pid, so
    for `sh _start.sh` -> `bash _serve.sh` -> `vllm` it is the first of them),
    or None where /proc does not say. Read as its age (uptime minus the
    start tick) so the boot time's whole-second rounding does not enter."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        start_ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return sim_clock.now() - max(0.0, age)


def record_process_start(what, until=None, root=None, **fields):
    """Append the piece from this process's start to `until` (default now):
    the tool's own start-up. Never raises."""
    start, end = process_start_time(), until if until is not None else sim_clock.now()
    if start is not None and end > start:
        record(what, start, end, root, **fields)
