"""Simulated `msprof`: --help, app mode (wrap and run an application, pass
signals through; when it exits, flush the collection, write the end_info
markers, auto export, exit), and --export=on."""
import json
import os
import signal
import subprocess
import sys
import time

from . import msprof_export, msprof_raw, sim_clock, sim_root, work_timeline

OPTIONS = [
    ("output", "Specify the directory that is used for storing data results."),
    ("application", "Specify application path, considering the risk of privilege escalation, please pay attention to\n"
                    "the group of the application and confirm whether it is the same as the user currently.\n"
                    "[Note] This option will be discarded in later versions.\n"
                    "you can try to use: msprof [msprof arguments] <app> [app arguments]"),
    ("type", "Specify the type of the parsed data, the default value is text. The possible parameters are 'text' or 'db'."),
    ("ascendcl", "Show acl profiling data, the default value is on."),
    ("runtime-api", "Show runtime api profiling data, the default value is off."),
    ("task-time", "Show task profiling data, the default value is on. The possible parameters are 'l0', 'l1', 'l2', 'on' or 'off'."),
    ("task-memory", "Show the memory usage of the operator, the default value is off. The possible parameters are 'on' or 'off'."),
    ("ai-core", "Turn on / off the ai core profiling, the default value is on when collecting app Profiling."),
    ("aic-mode", "Set the aic profiling mode to task-based or sample-based."),
    ("aic-freq", "The aic sampling frequency in hertz, the default value is 100 Hz, the range is 1 to 100 Hz."),
    ("aic-metrics", "The aic metrics groups, include ArithmeticUtilization, PipeUtilization, Memory, MemoryL0, ResourceConflictRatio, MemoryUB, L2Cache, MemoryAccess."),
    ("environment", "User app custom environment variable configuration."),
    ("sys-period", "Set total sampling period of system profiling in seconds."),
    ("sys-devices", "Specify the profiling scope by device ID when collect sys profiling.The value is all or ID list (split with ',')."),
    ("sys-hardware-mem", "Show the read/write bandwidth and component memory of ddr/hbm/llc, the default value is off."),
    ("sys-hardware-mem-freq", "The sampling frequency of hardware mem in hertz, the default value is 50 Hz, range 1 ~ 10000 for QOS and SOC, 1 ~ 100 for HBM, LLC and mem."),
    ("hccl", "Show hccl profiling data, the default value is off. [Note] This option will be discarded in later versions."),
    ("model-execution", "Show ge model execution profiling data, the default value is off. [Note] This option will be discarded in later versions."),
    ("storage-limit", "Specify the output directory volume. range 200MB ~ 4294967295MB."),
    ("export", "Export the parsed profiling data, the possible parameters are 'on' or 'off'."),
    ("reports", "Specify the reports sample config json file, used to control the exported timeline."),
    ("summary-format", "Specify the summary file format, the possible parameters are 'csv' or 'json'."),
    ("parse", "Parse the raw profiling data, the possible parameters are 'on' or 'off'."),
    ("query", "Query the profiling data info, the possible parameters are 'on' or 'off'."),
    ("python-path", "Specify the python interpreter path that is used for analysis."),
]
KNOWN = {name for name, _ in OPTIONS} | {"ge-api", "aicpu", "l2", "msproftx", "delay", "duration", "dynamic",
                                          "pid", "clear", "model-id", "iteration-id", "analyze", "rule",
                                          "sys-cpu-profiling", "sys-profiling", "sys-pid-profiling",
                                          "sys-io-profiling", "sys-interconnection-profiling", "dvpp-profiling",
                                          "llc-profiling", "host-sys", "host-sys-usage", "mstx-domain-include",
                                          "mstx-domain-exclude", "instr-profiling", "sys-sample-freq"}


def help_text():
    lines = ["", "Usage:", "      msprof [--options]", "", "Options:"]
    for name, desc in OPTIONS:
        first, *rest = desc.split("\n")
        lines.append("%8s%-32s<Optional> %s" % ("--", name, first))
        lines += ["\t\t\t\t\t\t   " + r for r in rest]
    return "\n".join(lines) + "\n"


def info(msg):
    print("[INFO] " + msg, flush=True)


def parse(argv):
    opts, app = {}, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            opts["help"] = "on"
        elif a.startswith("--"):
            name, eq, val = a[2:].partition("=")
            if name not in KNOWN:
                return None, None, "msprof: unrecognized option '%s'" % a.split("=")[0]
            if not eq:
                return None, None, "[ERROR] Argument --%s needs a value, e.g. --%s=<value>." % (name, name)
            opts[name] = val
        else:
            app = argv[i:]
            break
        i += 1
    return opts, app, None


def query_table(prof):
    devs = [n for n in sorted(os.listdir(prof)) if n.startswith("device_")]
    out = ["Job Info Device ID Dir Name Collection Time            Model ID Iteration Number Top Time Iteration Rank ID ", "",
           "NA                host     %s N/A      N/A              N/A                1       " % sim_clock.strftime("%Y-%m-%d %H:%M:%S.000000"), ""]
    for d in devs:
        out += ["NA       %-9s%-8s %s N/A      N/A              N/A                1 " % (d[7:], d, sim_clock.strftime("%Y-%m-%d %H:%M:%S.000000")), ""]
    return "\n".join(out)


def run_export(opts, cfg):
    out = opts.get("output")
    if not out:
        print("[ERROR] Argument --output is required when --export=on.", flush=True)
        return 1
    if opts.get("reports") and not os.path.isfile(opts["reports"]):
        print("[ERROR] The reports file %s does not exist." % opts["reports"], flush=True)
        return 1
    profs = msprof_export.find_profs(out)
    if not profs:
        print("[ERROR] No valid PROF_* directory found in %s." % os.path.abspath(out), flush=True)
        return 1
    stamp = sim_clock.strftime("%Y%m%d%H%M%S")
    t0 = sim_clock.now()
    work_timeline.record_process_start("msprof_process_start", t0, mode="export")
    record_export_invocation(out)
    hang = sim_root.fault(cfg, "export_hang")
    total_delay = sim_root.delay(cfg, "export", 1.0)
    for p in profs:
        info("Start export data in %s." % os.path.basename(p))
        if hang:
            while True:
                time.sleep(3600)
        time.sleep(total_delay / len(profs))
        msprof_export.export_prof(p, stamp, opts.get("type", "text"))
        info("Export all data in %s done." % os.path.basename(p))
    work_timeline.record("msprof_export", t0, sim_clock.now(), output=os.path.abspath(out), profs=len(profs))
    return 0


# Each `msprof --export=on` appends one line to OUT/.sim_export_invocations
# when it starts (tests check that an export is not run twice).
EXPORT_INVOCATION_LOG = ".sim_export_invocations"


def record_export_invocation(out):
    line = json.dumps({"pid": os.getpid(), "time": sim_clock.now()}, separators=(",", ":")) + "\n"
    fd = os.open(os.path.join(out, EXPORT_INVOCATION_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def run_app(opts, app, cfg):
    if opts.get("application"):
        cmd = ["bash", "-c", opts["application"]]
    elif app:
        cmd = app
    else:
        print("[ERROR] No application or system profiling options are specified.", flush=True)
        return 1
    output = os.path.abspath(opts.get("output") or os.getcwd())
    os.makedirs(output, exist_ok=True)
    before = set(os.listdir(output))
    freq = int(opts.get("sys-hardware-mem-freq", "50"))
    if not 1 <= freq <= 10000:
        print("[ERROR] Argument --sys-hardware-mem-freq=%d is out of range." % freq, flush=True)
        return 1
    env = dict(os.environ)
    env["PROFILING_MODE"] = "true"
    env["PROFILING_OPTIONS"] = json.dumps({"output": output, "sys_hardware_mem": opts.get("sys-hardware-mem", "off"),
                                           "sys_hardware_mem_freq": freq,
                                           "task_time": opts.get("task-time", "on"),
                                           "ai_core": opts.get("ai-core", "on"),
                                           "ascendcl": opts.get("ascendcl", "on")})
    stopped = {"sig": None, "child": None}

    def forward(sig, _f):
        stopped["sig"] = sig
        try:
            if stopped["child"] is not None:
                stopped["child"].send_signal(sig)
        except OSError:
            pass

    # Handlers before the child exists: a stop that arrives while msprof is
    # spawning the application must not be lost (a background job of a
    # non-interactive shell inherits SIGINT ignored, so without our handler
    # an early SIGINT would just vanish). It is passed on once the child runs.
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    info("Start profiling....")
    work_timeline.record_process_start("msprof_process_start", mode="application")
    child = subprocess.Popen(cmd, env=env)
    stopped["child"] = child
    if stopped["sig"] is not None:
        forward(stopped["sig"], None)
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:
            continue
    if rc != 0 and stopped["sig"] != signal.SIGINT:
        print("[WARNING] An exception has occurred in process %d, exit code %d." % (child.pid, rc), flush=True)
    created = sorted(os.path.join(output, n) for n in set(os.listdir(output)) - before if n.startswith("PROF_"))
    flush(created, cfg)
    profs = [p for p in created if any(n.startswith("device_") for n in os.listdir(p))]
    if not profs:
        print("[ERROR] Failed to find profiling data, please check that the application executes AI-related "
              "business, or ensure that aclInit/GEInitialize is invoked in the application", flush=True)
        return 1
    if cfg.get("msprof_auto_export", True):
        t0 = sim_clock.now()
        stamp = sim_clock.strftime("%Y%m%d%H%M%S")
        for p in profs:
            name = os.path.basename(p)
            info("Start export data in %s." % name)
            time.sleep(sim_root.delay(cfg, "msprof_auto_export", 0.0) / len(profs))
            msprof_export.export_prof(p, stamp)
            info("Export all data in %s done." % name)
            info("Start query data in %s." % name)
            print(query_table(p), flush=True)
            info("Query all data in %s done." % name)
        work_timeline.record("msprof_auto_export", t0, sim_clock.now(), output=output, profs=len(profs))
    info("Profiling finished.")
    for p in profs:
        info("Process profiling data complete. Data is saved in %s" % p)
    return 0


def flush(profs, cfg):
    """After the application exits: msprof drains the collection for delays.msprof_flush
    seconds, then writes every PROF dir's end_info markers. Faults: msprof_flush_hang
    (never finishes, never exits on its own), msprof_flush_crash (dies half-way: no end_info)."""
    t0 = sim_clock.now()
    if sim_root.fault(cfg, "msprof_flush_hang"):
        while True:
            time.sleep(3600)
    wait = sim_root.delay(cfg, "msprof_flush", 0.1)
    if sim_root.fault(cfg, "msprof_flush_crash"):
        time.sleep(wait / 2)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(wait)
    for p in profs:
        msprof_raw.finish(p)
    work_timeline.record("msprof_flush", t0, sim_clock.now(), profs=len(profs))


def main(argv):
    opts, app, err = parse(argv)
    if err:
        sys.stderr.write(err + "\n")
        return 1
    if not argv or opts.get("help"):
        sys.stdout.write(help_text())
        sys.stdout.flush()
        work_timeline.record_process_start("msprof_process_start", mode="help")
        return 0
    try:
        cfg = sim_root.load_config()
    except (sim_root.SimError, OSError, ValueError):
        cfg = {}
    if opts.get("export") == "on":
        return run_export(opts, cfg)
    return run_app(opts, app, cfg)
