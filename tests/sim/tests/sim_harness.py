"""Helpers for the simulator's own tests: build a target, run its tools with
the target's environment, start/stop simulated services, talk HTTP."""
import atexit
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

SIM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SIM_DIR, "python"))

from npusim import model_fixture, target_setup  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
PROFILE_CFG = '{"profiler":"torch","torch_profiler_dir":"./vllm_profile"}'
_MODEL_CACHE = {}


@atexit.register
def _remove_models():
    for d in _MODEL_CACHE.values():
        shutil.rmtree(d, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_and_rpc_ports(api_span=1, tries=50):
    """(api, rpc): api .. api+api_span-1 and rpc all free and distinct, all held at once while
    chosen (a node i of a hybrid deployment serves on api+i, so those neighbours must be free too)."""
    for _ in range(tries):
        held = []
        try:
            first = socket.socket()
            held.append(first)
            first.bind(("0.0.0.0", 0))
            api = first.getsockname()[1]
            if api + api_span > 65536:
                continue
            for k in range(1, api_span):
                s = socket.socket()
                held.append(s)
                s.bind(("0.0.0.0", api + k))
            rpc_sock = socket.socket()
            held.append(rpc_sock)
            rpc_sock.bind(("0.0.0.0", 0))
            return api, rpc_sock.getsockname()[1]
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no %d free neighbouring ports found in %d tries" % (api_span, tries))


def small_model(kind="dense", **kw):
    key = (kind, tuple(sorted(kw.items())))
    if key not in _MODEL_CACHE:
        d = tempfile.mkdtemp(prefix="npusim-model-")
        defaults = {"dense": dict(layers=4, hidden=1024, intermediate=2816, vocab=32000, heads=16, kv_heads=4,
                                  head_dim=64)}.get(kind, {})
        defaults.update(kw)
        model_fixture.make_model(d, kind=kind, **defaults)
        _MODEL_CACHE[key] = d
    return _MODEL_CACHE[key]


class SimTestCase(unittest.TestCase):
    """Gives each test a fresh target root and cleans up every process it starts."""

    target_kwargs = {}

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="npusim-test-")
        self.procs = []
        self.target = None

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make_target(self, **kw):
        args = dict(startup_delay=0.3, export_delay=0.3)
        args.update(self.target_kwargs)
        args.update(kw)
        self.target = target_setup.setup(os.path.join(self.tmp, "target"), **args)
        return self.target

    def make_node(self, name, address, **kw):
        """Another simulated host (its own root, address and clock) for a multi-node deployment;
        -> its target dict (self.target stays the first one)."""
        args = dict(startup_delay=0.3, export_delay=0.3, address=address, hostname=name)
        args.update(self.target_kwargs)
        args.update(kw)
        t = target_setup.setup(os.path.join(self.tmp, name), **args)
        if self.target is None:
            self.target = t
        return t

    def env(self, extra=None, target=None):
        t = target or self.target
        env = dict(os.environ)
        env["PATH"] = t["bin"] + ":" + env.get("PATH", "")
        env["PYTHONPATH"] = os.path.join(SIM_DIR, "python")
        env["NPUPROF_SIM_ROOT"] = t["root"]
        for k in ("PROFILING_MODE", "PROFILING_OPTIONS", "ASCEND_RT_VISIBLE_DEVICES", "VLLM_TORCH_PROFILER_DIR"):
            env.pop(k, None)
        env.update(extra or {})
        return env

    def run_tool(self, argv, extra_env=None, timeout=60, cwd=None, target=None):
        return subprocess.run(argv, env=self.env(extra_env, target), capture_output=True, text=True, timeout=timeout,
                              cwd=cwd or self.tmp)

    def sh(self, command, timeout=60, target=None):
        """Run a shell command after sourcing the target's set_env.sh, like the C++ workers do."""
        full = ". '%s' && %s" % ((target or self.target)["set_env"], command)
        env = {k: v for k, v in os.environ.items() if k not in ("NPUPROF_SIM_ROOT", "PYTHONPATH")}
        return subprocess.run(["bash", "-c", full], env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=self.tmp)

    def npu_smi(self, target=None):
        r = self.run_tool(["npu-smi", "info"], target=target)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def start(self, argv, devices=None, extra_env=None, name="svc", target=None, cwd=None):
        env = self.env(extra_env, target)
        if devices is not None:
            env["ASCEND_RT_VISIBLE_DEVICES"] = devices
        out = open(os.path.join(self.tmp, name + ".stdout.log"), "w")
        err = open(os.path.join(self.tmp, name + ".stderr.log"), "w")
        p = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd or self.tmp,
                             start_new_session=True)
        p.log_paths = (out.name, err.name)
        out.close()
        err.close()
        self.procs.append(p)
        return p

    def logs(self, p):
        with open(p.log_paths[0], newline="") as f:
            out = f.read()
        with open(p.log_paths[1], newline="") as f:
            return out, f.read()

    def wait_ready(self, p, port, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if p.poll() is not None:
                self.fail("service exited early rc=%s: %s" % (p.returncode, self.logs(p)[1][-2000:]))
            try:
                code, _ = http("GET", port, "/health", timeout=1)
                if code == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.fail("service not ready on %d" % port)

    def stop(self, p, sig=signal.SIGTERM, timeout=15):
        p.send_signal(sig)
        return p.wait(timeout)

    def serve(self, tp=1, devices=None, profile=False, extra=(), name="svc"):
        """`vllm serve` of the small model (served name m), ready; -> (process, port)."""
        port = free_port()
        argv = ["vllm", "serve", small_model(), "--port", str(port), "-tp", str(tp), "--served-model-name", "m"]
        if profile:
            argv += ["--profiler-config", PROFILE_CFG]
        p = self.start(argv + list(extra), devices=devices or ",".join(str(i) for i in range(tp)), name=name)
        self.wait_ready(p, port)
        return p, port

    def serve_under_msprof(self, tp=1, devices=None, freq=50, extra=(), name="msprof"):
        """The same service wrapped by `msprof --sys-hardware-mem=on` as the memory workflow
        does it; -> (msprof process, port, msprof output dir)."""
        port = free_port()
        serve = os.path.join(self.tmp, "_serve_%s.sh" % name)
        with open(serve, "w") as f:
            f.write("exec vllm serve %s --host 0.0.0.0 --port %d --served-model-name m --tensor-parallel-size %d %s\n"
                    % (small_model(), port, tp, " ".join(extra)))
        out_dir = os.path.join(self.tmp, name + "_data")
        p = self.start(["msprof", "--output=%s" % out_dir, "--sys-hardware-mem=on",
                        "--sys-hardware-mem-freq=%d" % freq, "--task-time=off", "--ai-core=off", "--ascendcl=off",
                        "--application=bash %s" % serve],
                       devices=devices or ",".join(str(i) for i in range(tp)), name=name)
        self.wait_ready(p, port)
        return p, port, out_dir

    def timeline(self, target=None):
        from npusim import work_timeline
        return work_timeline.read((target or self.target)["root"])

    def truth(self, target=None):
        d = (target or self.target)["truth_dir"]
        # Only finished files: a rewrite in flight is a "<name>.json.tmp.*" beside them.
        files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
        self.assertTrue(files, "no truth file")
        with open(os.path.join(d, files[-1])) as f:
            return json.load(f)


def http(method, port, path, body=None, timeout=30):
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data, method=method,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw) if raw else None
        except ValueError:
            return e.code, raw


def complete(port, max_tokens=4, prompt="hello there", timeout=30):
    """One /v1/completions request to the served model m; -> HTTP status."""
    return http("POST", port, "/v1/completions", {"model": "m", "prompt": prompt, "max_tokens": max_tokens},
                timeout=timeout)[0]


def wait_for(predicate, timeout=20, what="condition"):
    """Poll predicate() (every 20 ms) until it is truthy; returns its value, or raises AssertionError."""
    end = time.time() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.time() > end:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.02)


def parse_npu_smi(text):
    """Minimal split-on-'|' reader: {device_index: {npu, chip, used, total}}, process rows."""
    devs, procs = [], []
    in_proc = False
    rows = []
    for line in text.splitlines():
        if line.startswith("| NPU") and "Process id" in line:
            in_proc = True
            continue
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((in_proc, cells))
    dev_rows = [c for p, c in rows if not p][3:]
    for i in range(0, len(dev_rows), 2):
        r1, r2 = dev_rows[i], dev_rows[i + 1]
        pairs = [(int(u), int(t)) for u, t in re.findall(r"(\d+)\s*/\s*(\d+)", r2[2])]
        used, total = pairs[-1]
        devs.append({"npu": int(r1[0].split()[0]), "name": r1[0].split()[1], "chip": int(r2[0].split()[0]),
                     "used": used, "total": total, "cols": len(r2)})
    for p, c in rows:
        if p and not c[0].startswith("No running"):
            npu, chip = c[0].split()
            procs.append({"npu": int(npu), "chip": int(chip), "pid": int(c[1]), "name": c[2], "mem": int(c[3])})
    return devs, procs
