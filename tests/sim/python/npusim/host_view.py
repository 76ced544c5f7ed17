"""The simulated host's cores, memory and disk, as a real host reports them
(config `host`; every key null by default = this machine's own answer):

  cores             `nproc` prints it (bin/nproc, first on PATH after set_env.sh)
  mem_available_mb  MemAvailable of state/meminfo, the host's /proc/meminfo: set_env.sh
                    exports NPUPROF_MEMINFO=<root>/state/meminfo (npuprof reads
                    ${NPUPROF_MEMINFO:-/proc/meminfo}; a real host leaves it unset)
  mem_total_mb      MemTotal there (default: 2 x mem_available_mb)
  disk_free_mb      `df -Pk` prints it as Available for any path (bin/df)

analyse() holds the memory it would use (analyse.peak_mb_per_mb x its raw
MB, see analyse_impl.py) against mem_available_mb while it runs: a claim
that does not fit is an out-of-memory kill, as the kernel's OOM killer
would do to the real one. Claims live in state/analyse_memory.json (under
an flock); a claim of a process that is gone no longer counts."""
import fcntl
import json
import os

from . import sim_root

KEYS = ("cores", "mem_available_mb", "mem_total_mb", "disk_free_mb")
MEMINFO = "meminfo"
CLAIMS = "analyse_memory.json"


def settings(cfg):
    h = cfg.get("host") or {}
    return {k: h.get(k) for k in KEYS}


def meminfo_path(root):
    return os.path.join(sim_root.state_dir(root), MEMINFO)


NPROC_SHIM = """#!/bin/sh
# The simulated host's cores (npuprof test simulator): host.cores.
echo %d
"""

DF_SHIM = """#!/bin/sh
# The simulated host's free disk (npuprof test simulator): host.disk_free_mb on every path, POSIX format.
echo 'Filesystem     1024-blocks      Used Available Capacity Mounted on'
echo 'simfs %d %d %d 50%% /'
"""


def _write_exec(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def write(root, bindir, cfg):
    """bin/nproc, bin/df and state/meminfo for the keys set (removed for the keys not set).
    -> the lines set_env.sh adds."""
    h = settings(cfg)
    if h["cores"] is not None:
        _write_exec(os.path.join(bindir, "nproc"), NPROC_SHIM % int(h["cores"]))
    else:
        _remove(os.path.join(bindir, "nproc"))
    if h["disk_free_mb"] is not None:
        free_kb = int(float(h["disk_free_mb"]) * 1024)
        _write_exec(os.path.join(bindir, "df"), DF_SHIM % (2 * free_kb, free_kb, free_kb))
    else:
        _remove(os.path.join(bindir, "df"))
    path = meminfo_path(root)
    if h["mem_available_mb"] is None:
        _remove(path)
        return ""
    avail_kb = int(float(h["mem_available_mb"]) * 1024)
    total_kb = int(float(h["mem_total_mb"]) * 1024) if h["mem_total_mb"] is not None else 2 * avail_kb
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write("MemTotal:       %8d kB\nMemFree:        %8d kB\nMemAvailable:   %8d kB\n"
                "Buffers:               0 kB\nCached:                0 kB\n" % (total_kb, avail_kb // 2, avail_kb))
    os.replace(path + ".tmp", path)
    return "export NPUPROF_MEMINFO='%s'\n" % path


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Claims:
    """The memory the running analyse() calls hold (flock'd JSON file)."""

    def __init__(self, root):
        self.state = sim_root.state_dir(root)
        self.path = os.path.join(self.state, CLAIMS)

    def _edit(self, fn):
        with open(self.path + ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(self.path) as f:
                    claims = json.load(f)
            except (OSError, ValueError):
                claims = {}
            claims = {k: v for k, v in claims.items() if _alive(int(v.get("pid", 0)))}
            out = fn(claims)
            with open(self.path + ".tmp", "w") as f:
                json.dump(claims, f)
            os.replace(self.path + ".tmp", self.path)
            return out

    def claim(self, key, mb, limit_mb):
        """Adds the claim when it fits under limit_mb; -> (fits, MB held by the others)."""
        def fn(claims):
            held = sum(float(v["mb"]) for v in claims.values())
            if held + mb > limit_mb:
                return False, held
            claims[key] = {"pid": os.getpid(), "mb": mb}
            return True, held
        return self._edit(fn)

    def release(self, key):
        self._edit(lambda claims: claims.pop(key, None))
