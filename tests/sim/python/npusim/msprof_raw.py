"""PROF_* directories as msprof collection leaves them (raw side), and the
simulator's own raw payloads inside device_<id>/data/ that export reads.

Collection markers: host/start_info, device_<id>/start_info.<id> when the
dir is created; host/end_info(.done), device_<id>/end_info.<id>(.done) when
the collection is complete (msprof's flush, or torch_npu's finalise).

Raw payload files (simulator-internal JSON, real ones are binary):
  device_<id>/data/npu_mem.data         {"device", "freq", "segments": [[t0_us, t1_us, app_kb, device_kb], ...]}
  device_<id>/data/npu_module_mem.data  {"device", "freq", "segments": [[t0_us, t1_us, {component: kb}], ...]}
"""
import json
import os
import time

from . import sim_clock


def local_stamp(t=None, ms=True):
    t = sim_clock.now() if t is None else t
    s = time.strftime("%Y%m%d%H%M%S", time.localtime(t))
    return s + ("%03d" % int((t % 1) * 1000) if ms else "")


def prof_dir_name(index, pid, t=None):
    import hashlib  # here: only a process that names a PROF dir pays for loading it
    t = sim_clock.now() if t is None else t
    h = hashlib.sha256(("%d-%f" % (pid, t)).encode()).digest()
    letters = "".join(chr(ord("A") + b % 18) for b in h[:8])
    return "PROF_%06d_%s_%08d%s" % (index, local_stamp(t), pid % 100000000, letters)


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def create_prof(parent, pid, devices, index=1, t=None):
    """Create an (empty) PROF dir for one process with host/ and device_<id>/ parts."""
    t = sim_clock.now() if t is None else t
    path = os.path.join(parent, prof_dir_name(index, pid, t))
    os.makedirs(os.path.join(path, "host", "data"), exist_ok=True)
    _write(os.path.join(path, "host", "info.json"), json.dumps({"pid": str(pid), "hostname": os.uname().nodename,
                                                               "platform_version": "5", "devices": ",".join(str(d) for d in devices)}))
    _write(os.path.join(path, "host", "start_info"), json.dumps({"collectionTimeBegin": str(int(t * 1e6)),
                                                                "clockMonotonicRaw": str(time.monotonic_ns())}))
    for d in devices:
        os.makedirs(os.path.join(path, "device_%d" % d, "data"), exist_ok=True)
        _write(os.path.join(path, "device_%d" % d, "start_info.%d" % d),
               json.dumps({"collectionTimeBegin": str(int(t * 1e6))}))
        _write(os.path.join(path, "device_%d" % d, "info.json.%d" % d),
               json.dumps({"devices": str(d), "DeviceInfo": [{"id": d, "chip_id": 0}]}))
    return path


def write_memory(prof, device, freq, mem_segments, module_segments):
    data = os.path.join(prof, "device_%d" % device, "data")
    os.makedirs(data, exist_ok=True)
    _write(os.path.join(data, "npu_mem.data"), json.dumps({"device": device, "freq": freq, "segments": mem_segments}))
    _write(os.path.join(data, "npu_module_mem.data"),
           json.dumps({"device": device, "freq": freq, "segments": module_segments}))


def finish(prof, t=None):
    """Collection of this PROF dir is complete: host/end_info and
    device_<id>/end_info.<id> (collection end time), each followed by its
    .done marker. Written last, so their presence means nothing more comes."""
    t = sim_clock.now() if t is None else t
    end = json.dumps({"collectionTimeEnd": str(int(t * 1e6)), "clockMonotonicRaw": str(time.monotonic_ns())})
    _write(os.path.join(prof, "host", "end_info"), end)
    _write(os.path.join(prof, "host", "end_info.done"), "")
    for name in sorted(os.listdir(prof)):
        if name.startswith("device_"):
            d = name[len("device_"):]
            _write(os.path.join(prof, name, "end_info.%s" % d), end)
            _write(os.path.join(prof, name, "end_info.%s.done" % d), "")


def is_finished(prof):
    """Every end_info marker of the PROF dir is there (host and each device)."""
    if not os.path.isfile(os.path.join(prof, "host", "end_info.done")):
        return False
    return all(os.path.isfile(os.path.join(prof, "device_%d" % d, "end_info.%d.done" % d)) for d in prof_devices(prof))


def prof_devices(prof):
    return sorted(int(n[len("device_"):]) for n in os.listdir(prof)
                  if n.startswith("device_") and n[len("device_"):].isdigit())
