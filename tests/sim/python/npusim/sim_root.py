"""Where a simulated target keeps its state, and small helpers to read and
write it safely from several processes (atomic JSON writes, pid liveness)."""
import itertools
import json
import os
import sys
import threading
import time

ENV_ROOT = "NPUPROF_SIM_ROOT"


class SimError(Exception):
    pass


def root_dir(required=True):
    root = os.environ.get(ENV_ROOT, "")
    if not root:
        if required:
            raise SimError("simulator: %s is not set (source the target's set_env.sh)" % ENV_ROOT)
        return None
    return root


def state_dir(root):
    return os.path.join(root, "state")


def config_path(root):
    return os.path.join(state_dir(root), "config.json")


def instances_dir(root):
    return os.path.join(state_dir(root), "instances")


def truth_dir(root):
    return os.path.join(state_dir(root), "truth")


def load_config(root=None):
    root = root or root_dir()
    with open(config_path(root)) as f:
        return json.load(f)


_TMP_SEQ = itertools.count()


def write_json_atomic(path, obj, indent=2):
    """Write obj as JSON so that a concurrent reader sees either the old or
    the new file, never a torn one. Safe from several threads of one process
    (each write has its own temporary name)."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    tmp = "%s.tmp.%d.%d.%d" % (path, os.getpid(), threading.get_ident(), next(_TMP_SEQ))
    with open(tmp, "w") as f:
        f.write(json.dumps(obj, indent=indent, sort_keys=False) + "\n")  # one write, not one per token
    os.replace(tmp, path)


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def proc_start_time(pid):
    """Start time (clock ticks since boot) of pid, or None if it is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    if rest[0] in ("Z", "X"):
        return None
    return int(rest[19])


def pid_alive(pid, start_time=None):
    if not pid or pid <= 0:
        return False
    st = proc_start_time(pid)
    if st is None:
        return False
    if start_time is not None and st != start_time:
        return False
    return True


def proc_comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def fault(cfg, name, default=None):
    return cfg.get("faults", {}).get(name, default)


def delay(cfg, name, default=0.0):
    return float(cfg.get("delays", {}).get(name, default))


MULTINODE_DEFAULTS = {"join_timeout_s": 60.0, "startup_poll_s": 10.0, "control_timeout_s": 30.0}


def multinode(cfg, name):
    """A `multinode.*` setting (README.md "Multi-node data parallel"), with its default."""
    return float((cfg.get("multinode") or {}).get(name, MULTINODE_DEFAULTS[name]))


LOAD_SHARE = 0.3  # of a start-up step: a rank's weight loading (rank_worker.py)


def load_before_join(cfg, step):
    """Seconds a data-parallel node (headless or secondary) spends loading its weights before its
    engines say hello to the head (README.md "Multi-node data parallel"): multinode.load_before_join_s,
    by default the load share of its start-up step, so that joining costs what the head's own
    start-up does and never less."""
    v = (cfg.get("multinode") or {}).get("load_before_join_s")
    return LOAD_SHARE * step if v is None else max(0.0, float(v))


def own_address(cfg):
    """This simulated host's address (config network.address)."""
    return (cfg.get("network") or {}).get("address") or "127.0.0.1"


def per_rank(value, rank, default=0.0):
    """A per-rank setting: one number for every rank, a list indexed by rank
    (missing ranks: default) or a dict keyed by the rank number."""
    if value is None:
        return default
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, list):
        return float(value[rank]) if rank < len(value) and value[rank] is not None else default
    if isinstance(value, dict):
        v = value.get(str(rank), value.get(rank))
        return default if v is None else float(v)
    if isinstance(value, str) and value.strip():
        parts = value.split(",")
        return per_rank([float(p) for p in parts] if len(parts) > 1 else float(parts[0]), rank, default)
    return default


def parse_rank_list(value):
    """'1' / '0,2' / [1, 2] / True (= rank 0) -> set of ints."""
    if value is None or value is False:
        return set()
    if value is True:
        return {0}
    if isinstance(value, int):
        return {value}
    if isinstance(value, list):
        return {int(v) for v in value}
    return {int(v) for v in str(value).split(",") if v.strip() != ""}


def eprint(*a):
    print(*a, file=sys.stderr, flush=True)
