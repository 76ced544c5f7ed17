"""The target's own work, one JSON line per finished piece, in
state/timeline.jsonl: service start-up, each request, profiler control,
torch_npu finalise, msprof flush and export, analyse(), service shutdown.

A benchmark subtracts the union of these intervals from npuprof's wall time
to get npuprof's own overhead. Lines are appended with O_APPEND (one write
per line), so several processes can log at once; pieces may overlap
(concurrent requests), a piece that never finished (killed, hung) has no
line. Times are the target's clock (unix seconds)."""
import json
import os

from . import sim_root

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
