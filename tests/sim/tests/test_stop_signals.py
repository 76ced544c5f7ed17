"""Stop signals always stop the simulated service: the stop request a signal
handler sets takes no lock (a threading.Event set from a handler deadlocks
when the signal lands while the main thread is inside Event.wait), and
msprof passes on a SIGINT that arrives while it is still spawning the
application, even when it was started with SIGINT ignored (a background job
of a non-interactive shell, like npuprof's _start.sh)."""
import os
import signal
import subprocess
import sys
import time

from .sim_harness import SIM_DIR, SimTestCase, free_port, small_model

# The main thread waits on the flag in a tight loop (as serve_main's main loop
# does, just faster) while the test fires signals at it; every signal calls
# set(). With a threading.Event this re-enters Event.set() on the lock that
# Event.wait() holds, and hangs or dies with RecursionError.
FLAG_CHILD = r'''
import signal, sys, time
sys.path.insert(0, sys.argv[1])
from npusim.serve_main import StopFlag
flag = StopFlag()
signal.signal(signal.SIGINT, lambda s, f: flag.set())
signal.signal(signal.SIGTERM, lambda s, f: flag.set())
print("ready", flush=True)
end = time.time() + 2.0
n = 0
while time.time() < end:
    flag.wait(0.0005)
    n += 1
assert flag.is_set() and flag.wait(10)
print("done %d" % n, flush=True)
'''


class StopFlagFromSignalHandler(SimTestCase):
    def test_signal_storm_never_deadlocks(self):
        for _ in range(3):
            p = subprocess.Popen([sys.executable, "-c", FLAG_CHILD, os.path.join(SIM_DIR, "python")],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            self.assertEqual(p.stdout.readline().strip(), "ready")
            end = time.time() + 1.5  # stop before the child's 2 s loop ends (exit restores SIG_DFL)
            while time.time() < end and p.poll() is None:
                os.kill(p.pid, signal.SIGINT if int(time.time() * 1000) % 2 else signal.SIGTERM)
                time.sleep(0.0005)
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.fail("StopFlag.wait()/set() deadlocked under signals")
            self.assertEqual(p.returncode, 0, err[-2000:])
            self.assertIn("done", out)
            self.assertEqual(err, "")


class EarlyStopUnderMsprof(SimTestCase):
    def test_sigint_while_msprof_spawns_the_service(self):
        """SIGINT alone (no SIGTERM) stops msprof + service at any moment of start-up."""
        self.make_target()
        for delay in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8):
            port = free_port()
            serve = os.path.join(self.tmp, "_serve.sh")
            with open(serve, "w") as f:
                f.write("exec vllm serve %s --host 0.0.0.0 --port %d --tensor-parallel-size 2 "
                        "--max-model-len 2048\n" % (small_model(), port))
            env = self.env({"ASCEND_RT_VISIBLE_DEVICES": "6,7"})
            argv = ["msprof", "--output=%s" % os.path.join(self.tmp, "o%d" % port), "--sys-hardware-mem=on",
                    "--application=bash %s" % serve]
            # Like `setsid nohup sh _start.sh &` from `sh -c`: SIGINT ignored on entry.
            log = os.path.join(self.tmp, "msprof%d.log" % port)
            with open(log, "w") as out:
                p = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL, cwd=self.tmp, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            self.procs.append(p)
            # msprof's own interpreter start-up is not covered (SIGINT is ignored
            # until it installs its handlers); from "Start profiling" on it is.
            deadline = time.time() + 30
            while time.time() < deadline and "Start profiling" not in _read(log):
                time.sleep(0.005)
            time.sleep(delay)
            os.killpg(p.pid, signal.SIGINT)
            # A loaded 2-core CI machine stops the service slowly; the group
            # dump says which process survived if it really did.
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                self.fail("msprof-wrapped service survived SIGINT sent %.2f s after start; group: %s; log: %s"
                          % (delay, _group_dump(p.pid), _read(log)[-1500:]))
            deadline = time.time() + 10
            while time.time() < deadline and _group_alive(p.pid):
                time.sleep(0.05)
            self.assertFalse(_group_alive(p.pid), "processes left in the group after SIGINT at %.2f s" % delay)


def _read(path):
    with open(path) as f:
        return f.read()


def _group_members(pgid):
    """(pid, state, ppid) of every process in process group pgid."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(rest[2]) == pgid:
            yield d, rest[0], rest[1]


def _group_dump(pgid):
    out = []
    for pid, state, ppid in _group_members(pgid):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%s/status" % pid) as f:
                sig = [l.strip() for l in f if l.startswith(("SigIgn", "SigCgt", "SigPnd", "ShdPnd"))]
        except OSError:
            continue
        out.append("%s %s ppid=%s [%s] %s" % (pid, state, ppid, cmd[:120], " ".join(sig)))
    return "\n".join(out)


def _group_alive(pgid):
    return any(state != "Z" for _pid, state, _ppid in _group_members(pgid))
