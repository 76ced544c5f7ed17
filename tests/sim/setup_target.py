#!/usr/bin/env python3
"""Create a simulated Ascend target root. See README.md ("setup_target.py")."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from npusim import target_setup  # noqa: E402
from npusim.layouts import LAYOUTS  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="create a simulated Ascend NPU target root")
    ap.add_argument("--root", help="target root directory (required unless --list-faults)")
    ap.add_argument("--layout", choices=sorted(LAYOUTS), default="910B3")
    ap.add_argument("--devices", type=int, default=None, help="device (chip) count")
    ap.add_argument("--npu-ids", default=None, help="comma list of NPU ids, one per NPU")
    ap.add_argument("--hbm-total-mb", type=int, default=None)
    ap.add_argument("--baseline-mb", default="2862", help="one value, or a comma list (one per device)")
    ap.add_argument("--busy", action="append", default=[], metavar="DEV:proc|DEV:hbm[=MB]")
    ap.add_argument("--fault", action="append", default=[], metavar="NAME[=VALUE]")
    ap.add_argument("--startup-delay", type=float, default=0.5)
    ap.add_argument("--token-delay", type=float, default=0.001)
    ap.add_argument("--export-delay", type=float, default=1.0)
    ap.add_argument("--auto-export-delay", type=float, default=None,
                    help="msprof app mode: its own export at the app's exit (default: the --export-delay; "
                         "--set msprof_auto_export=false turns that export off)")
    ap.add_argument("--finalise-delay", default="0", metavar="S|S0,S1,...",
                    help="torch_npu finalise after /stop_profile, seconds (one value, or one per rank)")
    ap.add_argument("--msprof-flush-delay", type=float, default=0.1,
                    help="msprof app mode: flush after the app exits, before end_info and export")
    ap.add_argument("--activation", choices=["retained", "released"], default="retained",
                    help="does the allocator keep activation memory after a request (npu-smi shows it)?")
    ap.add_argument("--env-delay", type=float, default=0.0, help="sourcing set_env.sh takes this long")
    ap.add_argument("--login-delay", type=float, default=0.0,
                    help="login_rc.sh (the slow login shell's rc file) takes this long")
    ap.add_argument("--log-style", choices=["old", "new", "ascend"], default="ascend")
    ap.add_argument("--msprof-missing", action="store_true")
    ap.add_argument("--npu-smi-missing", action="store_true")
    ap.add_argument("--hostname", default=None)
    ap.add_argument("--clock-offset-s", type=float, default=0.0,
                    help="this host's clock runs this many seconds ahead (negative: behind) of the real one")
    ap.add_argument("--address", default=None,
                    help="this host's own address (127.x.y.z; default 127.0.0.1): what 'localhost' means on it "
                         "and the only address its data-parallel head binds")
    ap.add_argument("--set", action="append", default=[], metavar="DOTTED.KEY=JSON",
                    help="override any config key, e.g. memory.activation_mb=200")
    ap.add_argument("--list-faults", action="store_true")
    ap.add_argument("--update", action="store_true",
                    help="change an existing target in place: only --fault, --clear-faults and --set apply")
    ap.add_argument("--clear-faults", action="store_true", help="with --update: drop every fault first")
    a = ap.parse_args(argv)
    if a.list_faults:
        print(json.dumps(target_setup.FAULTS, indent=2))
        return 0
    if not a.root:
        ap.error("--root is required")
    try:
        base = [int(x) for x in a.baseline_mb.split(",")]
        fin = [float(x) for x in a.finalise_delay.split(",")]
    except ValueError:
        ap.error("--baseline-mb wants integers and --finalise-delay numbers, comma-separated")
    try:
        if a.update:
            print(json.dumps(target_setup.update(a.root, faults=a.fault, sets=a.set, clear_faults=a.clear_faults),
                             indent=2))
            return 0
        out = target_setup.setup(
            a.root, layout=a.layout, devices=a.devices,
            npu_ids=[int(x) for x in a.npu_ids.split(",")] if a.npu_ids else None,
            hbm_total_mb=a.hbm_total_mb, baseline_mb=base[0] if len(base) == 1 else base, busy=a.busy,
            faults=a.fault, startup_delay=a.startup_delay, token_delay=a.token_delay, export_delay=a.export_delay,
            auto_export_delay=a.auto_export_delay,
            log_style=a.log_style, msprof_missing=a.msprof_missing, npu_smi_missing=a.npu_smi_missing,
            hostname=a.hostname, sets=a.set, finalise_delay=fin[0] if len(fin) == 1 else fin,
            msprof_flush_delay=a.msprof_flush_delay, activation=a.activation, env_delay=a.env_delay,
            login_delay=a.login_delay, clock_offset_s=a.clock_offset_s, address=a.address)
    except ValueError as e:
        sys.stderr.write("setup_target: %s\n" % e)
        return 2
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
