"""Create a simulated target root: state/config.json, bin/ (links to the
simulated tools that are "installed"), set_env.sh. See README.md."""
import ipaddress
import json
import os
import sys
import shutil

from . import host_view, kernel_model, layouts, memory_plan, sim_root

SIM_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ("npu-smi", "msprof", "vllm")

FAULTS = {
    "operator_memory_csv": "{\"<rank>\": missing|empty|truncated|not_utf8|huge}: analyse() leaves that rank's "
                           "operator_memory.csv so (torch_profiler_with_memory; operator_memory_model.py)",
    "never_ready": "service starts, prints start-up logs, never binds its port",
    "ready_line_early": "seconds: uvicorn's 'Application startup complete.' is printed this long before the port "
                        "answers",
    "crash_on_start": "vllm_ascend|torch_npu|libhccl|device_type|<text>: traceback on stderr, exit 1",
    "rank_no_profile": "rank list: these ranks write no *_ascend_pt",
    "rank_no_kernel_details": "rank list: device data of these ranks is empty -> no kernel_details.csv",
    "rank_no_trace_view": "rank list: FRAMEWORK op data missing -> no trace_view.json",
    "chat_fail_ratio": "float 0..1: share of chat requests answered HTTP 500",
    "start_profile_500": "POST /start_profile answers 500",
    "stop_profile_500": "POST /stop_profile answers 500",
    "slow_profile_control": "seconds: delay before start/stop_profile answer",
    "export_hang": "msprof --export=on never finishes",
    "finalise_hang": "rank list: these ranks never finalise after /stop_profile (no profiler_info_<rank>.json)",
    "msprof_flush_hang": "msprof app mode never finishes its flush after the app exits (no end_info; only SIGKILL)",
    "msprof_flush_crash": "msprof app mode dies (SIGKILL) half-way through its flush: no end_info, no CSVs",
    "msprof_missing": "msprof is not on PATH (same as --msprof-missing)",
    "npu_smi_missing": "npu-smi is not on PATH (same as --npu-smi-missing)",
    "invalid_utf8": "true|exit code: npu-smi prints bytes that are not UTF-8 (GBK process names on stdout, "
                    "'dcmi error \\377\\376' on stderr), then exits 0 (true) or with that code",
    "terminal_escapes": "true|exit code: npu-smi prints terminal control sequences (set the title, clear the "
                        "screen, a C1 CSI) on stderr and in process names, then exits 0 (true) or with that code",
    "never_join": "true|wrong_port: a data-parallel node of a multi-node deployment never joins the head (true: "
                  "its engines start but never connect; wrong_port: they connect to the rpc port + 1 until "
                  "multinode.join_timeout_s, then exit 1)",
    "join_delay": "seconds: a data-parallel node connects to the head this much later",
    "die_after_requests": "N: after its engines served N requests the service's ranks die and it exits 1 "
                          "(a node lost mid-workload)",
}

# multinode.join_timeout_s: a node gives up connecting to the head after this long (exit 1);
# startup_poll_s: the head's "Waiting for ... core engine proc(s)" DEBUG period; control_timeout_s:
# how long either side waits for an answer to a forwarded call.
DEFAULT_MULTINODE = dict(sim_root.MULTINODE_DEFAULTS)


def check_address(address):
    """The simulated host's own address: a loopback IPv4 address (every listener binds loopback only)."""
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        raise ValueError("bad --address %r (want a 127.x.y.z address)" % address)
    if not ip.is_loopback:
        raise ValueError("bad --address %r: the simulator listens on loopback addresses only (127.0.0.0/8)"
                         % address)
    return str(ip)


def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_busy(spec, devices, default_mb=30000):
    dev, _, rest = spec.partition(":")
    kind, _, mb = rest.partition("=")
    if kind not in ("proc", "hbm") or not dev.isdigit() or int(dev) >= len(devices):
        raise ValueError("bad --busy %r (want DEV:proc[=MB] or DEV:hbm[=MB])" % spec)
    b = {"device": int(dev), "kind": kind, "mb": int(mb) if mb else default_mb}
    if kind == "proc":
        b["pid"] = 1333928 + int(dev)
        b["name"] = "python3"
    return b


def set_dotted(cfg, key, value):
    parts = key.split(".")
    cur = cfg
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value


def parse_faults(faults):
    fdict = {}
    for f in faults:
        name, eq, val = f.partition("=")
        if name not in FAULTS:
            raise ValueError("unknown fault %r (known: %s)" % (name, ", ".join(sorted(FAULTS))))
        fdict[name] = parse_value(val) if eq else True
    return fdict


def setup(root, layout="910B3", devices=None, npu_ids=None, hbm_total_mb=None, baseline_mb=2862, busy=(),
          faults=(), startup_delay=0.5, token_delay=0.001, export_delay=1.0, log_style="ascend",
          msprof_missing=False, npu_smi_missing=False, hostname=None, sets=(), finalise_delay=0.0,
          msprof_flush_delay=0.1, activation="retained", env_delay=0.0, login_delay=0.0, clock_offset_s=0.0,
          address=None, auto_export_delay=None):
    root = os.path.abspath(root)
    address = check_address(address or "127.0.0.1")
    devs = layouts.make_devices(layout, devices, npu_ids, hbm_total_mb, baseline_mb)
    if activation not in ("retained", "released"):
        raise ValueError("bad activation mode %r (want retained or released)" % activation)
    fdict = parse_faults(faults)
    msprof_missing = msprof_missing or bool(fdict.get("msprof_missing"))
    npu_smi_missing = npu_smi_missing or bool(fdict.get("npu_smi_missing"))
    cfg = {
        "schema": 1, "root": root, "sim_dir": SIM_DIR, "layout": layout,
        "npu_smi_version": layouts.LAYOUTS[layout]["version"], "devices": devs,
        "busy": [parse_busy(b, devs) for b in busy], "faults": fdict,
        "delays": {"startup": startup_delay, "token": token_delay, "prefill": 0.005, "export": export_delay,
                   "analyse": 0.0, "analyse_per_mb": 0.0, "finalise": finalise_delay, "msprof_flush": msprof_flush_delay,
                   # msprof's own export at the app's exit does the work of an --export=on
                   "msprof_auto_export": export_delay if auto_export_delay is None else auto_export_delay,
                   "env_script": env_delay, "login": login_delay},
        "memory": dict(memory_plan.DEFAULT_MEMORY, activation_release=activation == "released"),
        "kernels": {k: (dict(v) if isinstance(v, dict) else v) for k, v in kernel_model.DEFAULTS.items()},
        "log_style": log_style, "log_ansi": None, "bind_host": "127.0.0.1",
        # os.uname().nodename is socket.gethostname(), without loading socket
        "hostname": hostname or os.uname().nodename, "profile_dir_naming": "host",
        "kernel_details_header": "blockdim", "image_tokens": 256, "process_table": True,
        "msprof_auto_export": True,
        "clock": {"offset_s": float(clock_offset_s)},
        "network": {"address": address},
        "multinode": dict(DEFAULT_MULTINODE),
        "host": {k: None for k in host_view.KEYS},
        "scale": {"rows_per_rank": None, "rows_variation": 0.0, "raw_bytes_per_row": 64, "trace_view_mb": None},
        "analyse": {"peak_mb_per_mb": 0.0},
        # the simulated vLLM's ProfilerConfig fields; null = the current vLLM's (npusim/serve_profiler.py)
        "vllm": {"profiler_fields": None},
        "installed": [t for t in TOOLS if not ((t == "msprof" and msprof_missing) or
                                               (t == "npu-smi" and npu_smi_missing))],
    }
    for s in sets:
        k, _, v = s.partition("=")
        set_dotted(cfg, k, parse_value(v))
    state = os.path.join(root, "state")
    for d in ("instances", "truth"):
        os.makedirs(os.path.join(state, d), exist_ok=True)
    write_config(state, cfg)
    bindir = os.path.join(root, "bin")
    if os.path.isdir(bindir):
        shutil.rmtree(bindir)
    os.makedirs(bindir)
    for t in cfg["installed"]:
        os.symlink(os.path.join(SIM_DIR, "bin", t), os.path.join(bindir, t))
    env_script, login_rc = write_scripts(root, bindir, cfg["delays"].get("env_script", 0.0),
                                         cfg["delays"].get("login", 0.0), clock_offset(cfg), cfg)
    return {"root": root, "set_env": env_script, "login_rc": login_rc, "bin": bindir,
            "address": cfg["network"]["address"], "clock_offset_s": clock_offset(cfg),
            "config": os.path.join(state, "config.json"), "timeline": os.path.join(state, "timeline.jsonl"),
            "truth_dir": os.path.join(state, "truth"), "layout": layout, "installed": cfg["installed"],
            "faults": fdict, "busy": cfg["busy"],
            "devices": [{k: d[k] for k in ("index", "npu_id", "chip", "name", "total_mb", "baseline_mb")}
                        for d in devs]}


def write_config(state, cfg):
    tmp = os.path.join(state, "config.json.tmp")
    with open(tmp, "w") as f:
        f.write(json.dumps(cfg, indent=2))
    os.replace(tmp, os.path.join(state, "config.json"))


def _sleep_line(seconds):
    return "sleep %s\n" % repr(float(seconds)) if seconds and float(seconds) > 0 else ""


def clock_offset(cfg):
    return float((cfg.get("clock") or {}).get("offset_s") or 0.0)


def real_date():
    """GNU date as installed (not a shim in some target's bin/)."""
    for d in ("/usr/bin", "/bin"):
        if os.access(os.path.join(d, "date"), os.X_OK):
            return os.path.join(d, "date")
    return shutil.which("date") or "/bin/date"


# The target's `date` (bin/date, first on PATH after set_env.sh): GNU date on the
# host's shifted clock. Microsecond resolution (bash's EPOCHREALTIME); arguments
# that name another time (-d, -r, -f, -s) pass through unshifted.
DATE_SHIM = """#!/bin/bash
# The simulated host's clock (npuprof test simulator): GNU date, shifted by clock.offset_s.
off_ns=%(off_ns)d
real='%(real)s'
for a in "$@"; do
  case $a in -d*|--date*|-r*|--reference*|-f*|--file*|-s*|--set*) exec "$real" "$@" ;; esac
done
[ "$off_ns" -eq 0 ] && exec "$real" "$@"
t=${EPOCHREALTIME/[.,]/}
[ -n "$t" ] || t=$(( $("$real" +%%s%%N) / 1000 ))
ns=$(( t * 1000 + off_ns ))
printf -v at '@%%d.%%09d' $(( ns / 1000000000 )) $(( ns %% 1000000000 ))
exec "$real" -d "$at" "$@"
"""


def write_date_shim(bindir, offset_s):
    path = os.path.join(bindir, "date")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(DATE_SHIM % {"off_ns": int(round(float(offset_s) * 1e9)), "real": real_date()})
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path


def write_python_link(bindir):
    path = os.path.join(bindir, "python3")
    tmp = path + ".tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.realpath(sys.executable), tmp)
    os.replace(tmp, path)
    return path


def write_scripts(root, bindir, env_delay=0.0, login_delay=0.0, clock_offset_s=0.0, cfg=None):
    """set_env.sh (the target's "Ascend set_env.sh"; sourcing it takes env_delay s, as the real
    one's ~100 ms), login_rc.sh (what a slow login shell's rc file costs: login_delay s; a
    harness makes every `bash -c` of its sshd read it with `SetEnv BASH_ENV=<root>/login_rc.sh`)
    and bin/date (the host's clock, clock_offset_s ahead of the real one), and bin/python3: the
    interpreter the simulator runs on. The simulated tools start with `#!/usr/bin/env python3`
    and npuprof runs python3 on the target; with bin/ first on PATH, none of them goes through a
    version manager's shim of this host (pyenv's costs ~0.4 s of CPU per start, where the
    interpreter itself takes ~30 ms). With cfg's `host` keys set: bin/nproc, bin/df and
    state/meminfo (host_view.py), and set_env.sh exports NPUPROF_MEMINFO."""
    write_date_shim(bindir, clock_offset_s)
    write_python_link(bindir)
    host_lines = host_view.write(root, bindir, cfg or {})
    pyroot = os.path.join(SIM_DIR, "python")
    env_script = os.path.join(root, "set_env.sh")
    with open(env_script, "w") as f:
        f.write("# Simulated Ascend toolkit environment (npuprof test simulator)\n"
                + _sleep_line(env_delay) +
                "export NPUPROF_SIM_ROOT='%s'\n"
                "export ASCEND_HOME_PATH='%s/ascend-toolkit/latest'\n"
                "export ASCEND_TOOLKIT_HOME=\"$ASCEND_HOME_PATH\"\n"
                "export PATH='%s':\"$PATH\"\n"
                "export PYTHONPATH='%s'${PYTHONPATH:+:\"$PYTHONPATH\"}\n" % (root, root, bindir, pyroot)
                + host_lines)
    login_rc = os.path.join(root, "login_rc.sh")
    with open(login_rc, "w") as f:
        f.write("# A slow login shell's rc file (npuprof test simulator): costs what sourcing the\n"
                "# Ascend set_env.sh from ~/.bashrc costs on a real machine.\n" + _sleep_line(login_delay))
    return env_script, login_rc


def update(root, faults=(), sets=(), clear_faults=False):
    """Change the config of an existing target in place (between two runs): add faults
    (or drop them all first) and apply --set keys; the rest stays as it is. The next
    service start, msprof or analyse() reads the new config."""
    root = os.path.abspath(root)
    state = os.path.join(root, "state")
    path = os.path.join(state, "config.json")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError("no target config at %s (%s): create the target first" % (path, e))
    if clear_faults:
        cfg["faults"] = {}
    cfg.setdefault("faults", {}).update(parse_faults(faults))
    for s in sets:
        k, _, v = s.partition("=")
        set_dotted(cfg, k, parse_value(v))
    write_config(state, cfg)
    delays = cfg.get("delays", {})
    write_scripts(root, os.path.join(root, "bin"), delays.get("env_script", 0.0), delays.get("login", 0.0),
                  clock_offset(cfg), cfg)
    return {"root": root, "config": path, "faults": cfg["faults"], "delays": delays, "clock": cfg.get("clock", {}),
            "memory": cfg.get("memory", {}), "kernels": cfg.get("kernels", {})}
