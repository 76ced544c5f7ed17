"""`npu-smi info` for the simulated target: device HBM follows the live
service instances (state/instances/*.json: the level each holds now, and its
per-level increase per device) and the pre-set busy devices. It runs once
per probe and preflight, so it imports little (no glob: see _instance_files)."""
import os
import sys

from . import hbm_leak, sim_root, work_timeline
from .layouts import LAYOUTS
from .npu_smi_render import render

USAGE = """Usage: npu-smi [OPTIONS] COMMAND [ARGS]...

Commands:
        info                 Show information.
        set                  Set configuration.
        upgrade              Upgrade firmware.

Options:
        -h, --help           Show this message and exit.
        -v, --version        Show the version of npu-smi.
"""


# Fault `invalid_utf8`: what a GBK locale or a broken driver prints. The GBK
# bytes of "\u6d4b\u8bd5" are not UTF-8; names carry them surrogate-escaped.
GBK_NAME_SUFFIX = b"\xb2\xe2\xca\xd4".decode("utf-8", "surrogateescape")
DCMI_ERROR = b"dcmi error \377\376\n"

# Fault `terminal_escapes`: bytes a terminal obeys (OSC 0 sets its title, CSI 2J
# clears the screen, U+009B is a one-character CSI); npuprof must show them
# escaped, never raw. Process names get the short form (npu-smi shows 15
# characters of a name).
TERMINAL_ESCAPES = "\x1b]0;TITLE\x07\x1b[2J\u009b2J"
NAME_ESCAPES = "\x1b[2J\u009b"


def _instance_files(d):
    """What glob(d/*.json) lists, sorted: no hidden names, no temporary files."""
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(os.path.join(d, n) for n in names if n.endswith(".json") and not n.startswith("."))


def device_usage(root, cfg):
    """-> (used_mb per device index, process rows)."""
    devs = cfg["devices"]
    used = {d["index"]: float(d["baseline_mb"]) for d in devs}
    procs = []
    for b in cfg.get("busy", []):
        used[b["device"]] += b["mb"]
        if b["kind"] == "proc":
            d = devs[b["device"]]
            procs.append({"device": b["device"], "npu_id": d["npu_id"], "chip": d["chip"], "pid": b["pid"],
                          "name": b.get("name", ""), "mem_mb": b["mb"]})
    for path in _instance_files(sim_root.instances_dir(root)):
        inst = sim_root.read_json(path)
        if not inst or not sim_root.pid_alive(inst.get("main_pid"), inst.get("main_start")):
            continue
        key = inst.get("level")  # the HBM level (hbm_levels.LEVELS) the service's devices hold now
        leaked = hbm_leak.leaked_mb(inst.get("leak"))  # 0 unless config `leak` and ready
        for rk in inst.get("ranks", []):
            if not sim_root.pid_alive(rk["pid"], rk.get("start")):
                continue
            delta = 0
            if key:
                delta = inst["used_delta_mb"].get(str(rk["device"]), {}).get(key, 0) + leaked
            used[rk["device"]] += delta
            d = devs[rk["device"]]
            procs.append({"device": rk["device"], "npu_id": d["npu_id"], "chip": d["chip"], "pid": rk["pid"],
                          "name": sim_root.proc_comm(rk["pid"])[:15], "mem_mb": int(round(delta))})
    return used, procs


def render_info(root, cfg):
    layout = LAYOUTS[cfg["layout"]]
    kind = layout["kind"]
    used, procs = device_usage(root, cfg)
    chips = []
    for d in cfg["devices"]:
        u = int(round(used[d["index"]]))
        busy = any(p["device"] == d["index"] for p in procs) or u - d["baseline_mb"] > 0
        ch = {"npu_id": d["npu_id"], "chip": d["chip"], "phy_id": d["phy_id"], "name": d["name"],
              "health": d["health"], "power": d["power"], "temp": d["temp"], "hugepages": d["hugepages"],
              "bus_id": d["bus_id"], "aicore": 17 if busy and kind == "a3" else 0}
        if kind == "310p":
            ch["mem"] = [u, d["total_mb"]]
        else:
            ch["mem"] = [0, 0]
            ch["hbm"] = [u, d["total_mb"]]
        chips.append(ch)
    procs.sort(key=lambda p: (p["device"], p["pid"]))
    if cfg.get("faults", {}).get("invalid_utf8") is not None:
        for p in procs:
            p["name"] = p["name"][:11] + GBK_NAME_SUFFIX
    if cfg.get("faults", {}).get("terminal_escapes") is not None:
        for p in procs:
            p["name"] = p["name"][:4] + NAME_ESCAPES
    return render(kind, cfg.get("npu_smi_version", layout["version"]), chips, procs,
                  process_table=cfg.get("process_table", True))


def main(argv):
    try:
        return _main(argv)
    finally:
        work_timeline.record_process_start("npu_smi", args=" ".join(argv)[:80])


def _main(argv):
    try:
        root = sim_root.root_dir()
        cfg = sim_root.load_config(root)
    except (sim_root.SimError, OSError, ValueError) as e:
        sys.stderr.write("npu-smi: %s\n" % e)
        return 1
    if argv == ["info"]:
        bad = cfg.get("faults", {}).get("invalid_utf8")
        if bad is not None:
            sys.stdout.flush()
            sys.stdout.buffer.write(render_info(root, cfg).encode("utf-8", "surrogateescape"))
            sys.stdout.buffer.flush()
            sys.stderr.buffer.write(DCMI_ERROR)
            sys.stderr.buffer.flush()
            return 0 if bad is True else int(bad)
        escapes = cfg.get("faults", {}).get("terminal_escapes")
        if escapes is not None:  # UTF-8 whatever the target's locale
            sys.stdout.flush()
            sys.stdout.buffer.write(render_info(root, cfg).encode("utf-8"))
            sys.stdout.buffer.flush()
            sys.stderr.buffer.write(("dcmi error " + TERMINAL_ESCAPES + "\n").encode("utf-8"))
            sys.stderr.buffer.flush()
            return 0 if escapes is True else int(escapes)
        sys.stdout.write(render_info(root, cfg))
        return 0
    if argv in (["-v"], ["--version"]):
        sys.stdout.write("npu-smi version: %s\n" % cfg.get("npu_smi_version", LAYOUTS[cfg["layout"]]["version"]))
        return 0
    sys.stdout.write(USAGE)
    return 255 if argv else 1

