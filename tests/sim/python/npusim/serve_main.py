"""The simulated `vllm serve` process: resolves devices, plans memory,
spawns one process per rank, prints start-up logs, serves HTTP, records the
state npu-smi reads and the ground truth tests compare against, and shuts
everything down cleanly on SIGINT/SIGTERM. In a multi-node data-parallel
deployment (dp_topology.py) it is the head (dp_head.py: waits for every
node's engines before it serves) or a node (dp_node.py: joins the head);
requests and profiling are in serve_requests.py."""
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time

from . import (hbm_leak, dp_head, dp_node, dp_topology, ground_truth, hbm_levels, log_lines, memory_plan, msprof_raw,
               msprof_series, sim_clock, sim_root, work_timeline)
from .http_api import make_server, serve_in_thread
from .log_lines import Logger
from .serve_requests import RequestsMixin
from .service_phases import PhaseLog

ENV_ERRORS = {
    "vllm_ascend": "ModuleNotFoundError: No module named 'vllm_ascend'",
    "torch_npu": "ModuleNotFoundError: No module named 'torch_npu'",
    "libhccl": "ImportError: libhccl.so: cannot open shared object file: No such file or directory",
    "device_type": "RuntimeError: Failed to infer device type",
}


class StopFlag:
    """Stop request that a signal handler may set: a plain flag plus a
    non-blocking self-pipe, no locks. A threading.Event must not be set from
    a signal handler: the handler runs in the main thread, which may be inside
    Event.wait() holding the Event's own (non-reentrant) lock; set() then
    blocks on that lock forever, and every later SIGINT/SIGTERM handler blocks
    the same way, so the service survives both signals."""

    def __init__(self):
        self._set = False
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    def set(self):
        self._set = True
        try:
            os.write(self._w, b"x")
        except OSError:  # pipe full: a wake-up is already pending
            pass

    def is_set(self):
        return self._set

    def wait(self, timeout):
        """True when set; otherwise sleeps up to timeout (woken by set())."""
        if not self._set:
            try:
                select.select([self._r], [], [], max(0.0, timeout))
            except InterruptedError:
                pass
            try:
                os.read(self._r, 512)
            except OSError:
                pass
        return self._set


class Service(RequestsMixin):
    def __init__(self, args, entry, topo):
        self.args = args
        self.entry = entry
        self.topo = topo
        self.root = sim_root.root_dir()
        self.cfg = sim_root.load_config(self.root)
        self.own_address = sim_root.own_address(self.cfg)
        self.style = self.cfg.get("log_style", "ascend")
        self.pid = os.getpid()
        self.stop_event = StopFlag()  # set from signal handlers: no locks
        self.lock = threading.Lock()
        self.truth_lock = threading.RLock()  # taken after self.lock, never before it
        self.api_log = Logger(self.style, log_lines.api_prefix(self.style, self.pid) if topo.serves_api else "",
                              self.cfg.get("log_ansi"))
        self.model = args.model
        self.served_names = list(args.served_model_name or [args.model])
        self.served_name = self.served_names[0]
        self.tp = topo.tp
        self.dp = topo.dp            # the whole deployment's DP size
        self.world = topo.local_world  # ranks on this node
        self.head = None             # dp_head.Head on a multi-node head
        self.node = None             # dp_node.NodeClient on a multi-node node
        self.loaded_before_join = 0.0  # seconds of weight loading a node did before it joined
        self.failure = None          # why this service stops with exit code 1 (a thread set it)
        self.dying = False           # fault die_after_requests fired
        self.max_model_len = args.max_model_len or 4096
        self.started = sim_clock.now()
        work_timeline.record_process_start("service_process_start", self.started)
        self.image_tokens = int(self.cfg.get("image_tokens", 256))
        self.ranks = []          # [{"rank", "pid", "start", "device", "proc", "fd"}]
        self.phases = PhaseLog(memory_plan.memory_settings(self.cfg)["activation_release"], self.started)
        self.phase = "starting"
        self.ready = False
        self.stop_requested_at = None
        self.init_requests()
        self.leak = hbm_leak.settings(self.cfg)  # config `leak`: HBM that grows once ready
        self.leak_ready_at = None
        self.instance = "vllm-%d-%s" % (self.pid, sim_clock.strftime("%Y%m%dT%H%M%S"))
        self.truth_path = os.path.join(sim_root.truth_dir(self.root), self.instance + ".json")
        self.inst_path = os.path.join(sim_root.instances_dir(self.root), self.instance + ".json")
        self.plan = None
        self.truth = None
        self.msprof = self._msprof_options()
        self.prof_dirs = {}
        pc = args.profiler_config or {}
        env_dir = os.environ.get("VLLM_TORCH_PROFILER_DIR")
        self.profiler_enabled = bool(pc.get("profiler")) or bool(env_dir)
        self.profiler_dir = os.path.abspath(pc.get("torch_profiler_dir") or env_dir or "./vllm_profile")
        self.profiler_with_stack = bool(pc.get("torch_profiler_with_stack", True))
        self.profiler_with_memory = bool(pc.get("torch_profiler_with_memory", False))  # operator_memory_model.py

    # ---- helpers -------------------------------------------------------------
    def _msprof_options(self):
        if os.environ.get("PROFILING_MODE") != "true":
            return None
        try:
            opts = json.loads(os.environ.get("PROFILING_OPTIONS", "{}"))
        except ValueError:
            return None
        if opts.get("sys_hardware_mem") != "on" or not opts.get("output"):
            return dict(opts, memory=False)
        return dict(opts, memory=True)

    def _sleep(self, secs):
        return self.stop_event.wait(secs)

    def _mark(self, phase, level=None, state=None, t=None):
        """Enter `phase` (HBM `level`, None = unchanged); `state` is the coarse phase of truth and
        the instance record (starting|loaded|ready|inferred|stopping)."""
        self.phases.mark(phase, level, t)
        if state:
            self.phase = state
        if state == "ready" and self.leak_ready_at is None:
            self.leak_ready_at = sim_clock.now() if t is None else t
        self._write_instance()

    def _write_instance(self):
        deltas = {}
        if self.plan:
            for r in self.plan["ranks"]:
                deltas[str(r["device"])] = hbm_levels.delta_mb(r)
        sim_root.write_json_atomic(self.inst_path, {
            "instance": self.instance, "main_pid": self.pid, "main_start": sim_root.proc_start_time(self.pid),
            "phase": self.phase, "level": self.phases.level, "in_flight": self.phases.in_flight,
            "port": self.args.port,
            "ranks": [{"rank": r["rank"], "pid": r["pid"], "start": r["start"], "device": r["device"]}
                      for r in self.ranks],
            "used_delta_mb": deltas,
            "leak": hbm_leak.instance_record(self.leak, self.leak_ready_at, self.requests_total)})

    def _write_truth(self, status=None, extra=None):
        """Rewrite the truth file (status None = unchanged), with the phases, requests and
        profiling sessions so far. Safe from any thread."""
        with self.truth_lock:
            t = dict(self.truth or {})
            t.update({"status": status or t.get("status", "starting"), "phase": self.phase,
                      "updated_at": sim_clock.now(), "phases": self.phases.truth(),
                      "requests": self.requests_total, "requests_log": list(self.requests_log),
                      "engine_requests": self.engine_requests,
                      "engine_requests_log": list(self.engine_requests_log),
                      "profile_sessions": self.profile_sessions, "deployment": self.deployment_truth(),
                      "leak": hbm_leak.truth(self.leak, self.leak_ready_at)})
            if extra:
                t.update(extra)
            self.truth = t
            sim_root.write_json_atomic(self.truth_path, t)

    def write_truth_soon(self):
        """Rewrite the truth now (a thread saw the deployment change)."""
        if self.truth is not None:
            self._write_truth()

    def deployment_truth(self):
        d = dict(self.topo.truth(), clock_offset_s=sim_clock.offset(), host_address=self.own_address,
                 hostname=self.cfg.get("hostname"))
        if self.head is not None:
            d.update(self.head.truth())
        if self.node is not None:
            d.update(self.node.truth())
        return d

    def fail(self, message):
        """From any thread: the deployment broke (a node or the head lost); stop with exit code 1."""
        if self.failure is None:
            self.failure = message
        self.stop_event.set()

    def node_lost(self, node):
        """The head saw a node's link close while not shutting down."""
        self.write_truth_soon()
        self.fail("RuntimeError: remote engine core(s) %s on node %s (%s, pid %s) %s; the deployment cannot "
                  "serve without them" % (node["engines"], node["node_rank"], node.get("address"), node.get("pid"),
                                          "stopped" if node.get("left") == "stopped" else "died unexpectedly"))

    def _crash(self, message, code=1):
        sys.stderr.write("Traceback (most recent call last):\n"
                         '  File "/usr/local/bin/vllm", line 8, in <module>\n'
                         "    sys.exit(main())\n"
                         '  File "/usr/local/lib/python3.11/site-packages/vllm/entrypoints/cli/main.py", line 54, in main\n'
                         "    args.dispatch_function(args)\n"
                         + message + "\n")
        sys.stderr.flush()
        if not self.ready:
            work_timeline.record("service_startup", self.started, sim_clock.now(), instance=self.instance,
                                 port=self.args.port, ok=False, error=message[:200])
        if self.truth is not None:
            self._write_truth("crashed", {"error": message})
        self._cleanup()
        sys.exit(code)

    def _devices(self):
        devs = self.cfg["devices"]
        vis = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
        if vis is None or vis.strip() == "":
            chosen = devs
        else:
            chosen = []
            for tok in vis.split(","):
                tok = tok.strip()
                if not tok.isdigit() or int(tok) >= len(devs):
                    self._crash("RuntimeError: ASCEND_RT_VISIBLE_DEVICES=%s names device %s, which does not exist"
                                % (vis, tok))
                chosen.append(devs[int(tok)])
        if len(chosen) < self.world:
            self._crash("ValueError: World size (%d) is larger than the number of available NPUs (%d) in this node."
                        % (self.world, len(chosen)))
        return chosen[:self.world]

    # ---- start-up ------------------------------------------------------------
    def startup(self):
        a = self.args
        style = self.style
        api = self.api_log
        step = sim_root.delay(self.cfg, "startup", 0.5)
        if style == "ascend":
            api.info("utils.py:297", "version 0.18.0")
        api.info("utils.py:233" if style != "old" else "api_server.py:712",
                 "non-default args: {'model_tag': %r, 'model': %r, 'tensor_parallel_size': %d}"
                 % (a.model, a.model, self.tp))
        topo = self.topo
        if topo.role == "headless":
            api.info("serve.py:224", "Launching %d data parallel engine(s) in headless mode, with head node address "
                     "%s." % (topo.dp_local, topo.handshake_uri()))
        if self.profiler_enabled and topo.serves_api:
            if a.profiler_config:
                api.info("api_server.py:1760", "Profiler with mode '%s' is enabled in the API server. This should "
                         "ONLY be used for local development!" % (a.profiler_config.get("profiler") or "torch"))
            else:
                api.warning("api_server.py:1760", "Torch Profiler is enabled in the API server. This should ONLY "
                            "be used for local development!")
        if self.msprof:
            self._sleep(sim_root.delay(self.cfg, "msprof_startup", 0.0))  # msprof wrapping slows start-up
        crash = sim_root.fault(self.cfg, "crash_on_start")
        if crash:
            self._sleep(min(step * 0.4, 0.5))
            self._crash(ENV_ERRORS.get(str(crash), ENV_ERRORS["vllm_ascend"] if crash is True else str(crash)))
        if not os.path.isdir(self.model):
            self._crash("OSError: %s is not a local folder and is not a valid model identifier listed on "
                        "'https://huggingface.co/models'" % self.model)
        devices = self._devices()
        cc = a.compilation_config or {}
        mode = cc.get("cudagraph_mode") if isinstance(cc, dict) else None
        try:
            self.plan = memory_plan.plan(self.cfg, self.model, devices, self.tp, self.dp, a.enable_expert_parallel,
                                         a.gpu_memory_utilization, self.max_model_len, a.enforce_eager, mode,
                                         rank_offset=topo.rank_offset, hccl_buffsize_mb=_hccl_buffsize(self),
                                         kv_cache_memory_bytes=a.kv_cache_memory_bytes)
        except memory_plan.NoKvRoom as e:
            # vllm-ascend logs the (negative) KV budget, then refuses to start.
            api.info("worker.py:357" if style != "new" else "gpu_worker.py:255",
                     "Available KV cache memory: %.2f GiB" % e.kv_gib)
            self._crash("ValueError: %s" % e)
        except (ValueError, MemoryError, FileNotFoundError) as e:
            self._crash("%s: %s" % (type(e).__name__, e))
        mc = self.plan["model_config"]
        if style == "ascend" and not a.enforce_eager:
            api.info("utils.py:582", "No adjustment needed for ACL graph batch sizes: %s model (layers: %d) with %d sizes"
                     % ((mc.get("architectures") or ["LlamaForCausalLM"])[0], mc.get("num_hidden_layers", 1),
                        int(self.cfg.get("graph_sizes", 35))))
        self.truth = ground_truth.truth_doc(self, devices, mode)
        self._mark("starting", "base", "starting")
        self._write_truth("starting")
        if self.msprof:
            self.prof_dirs["main"] = msprof_raw.create_prof(self.msprof["output"], self.pid, [], index=1)
        if topo.role == "head":
            self.head = dp_head.Head(self)
            try:
                self.head.bind()
            except OSError as e:
                self._crash("zmq.error.ZMQError: %s (addr='%s')" % (e.strerror, topo.handshake_uri()))
            self._write_truth()
        elif topo.multinode:
            self.node = dp_node.NodeClient(self)
            self._write_truth()
            # A node's engines join once they have loaded their weights; the ranks spawned after
            # the welcome then skip that part of their start-up (self.loaded_before_join).
            self.loaded_before_join = sim_root.load_before_join(self.cfg, step)
            if self.loaded_before_join > 0 and self._sleep(self.loaded_before_join):
                raise KeyboardInterrupt
            try:
                self.node.join()
            except dp_node.JoinError as e:
                api.error("core.py:1120", "Engine core(s) %s could not join the data parallel deployment: %s"
                          % (topo.local_dp_ranks, e))
                self._crash(str(e))
            self._write_truth()
        self._spawn_ranks(devices, step)
        self._wait_ranks("L")
        self._mark("loaded", "loaded", "loaded")
        self._wait_ranks("P")
        self._mark("profile_run", "profile")
        self._wait_ranks("K")
        self._mark("kv_allocated", "kv")
        p = self.plan
        for d in topo.local_dp_ranks:
            eng = Logger(style, log_lines.engine_prefix(style, self.pid, self.dp, d), self.cfg.get("log_ansi"))
            if style == "old":
                if d == topo.start_rank:
                    eng.info("distributed_gpu_executor.py:57", "# GPU blocks: %d, # CPU blocks: %d"
                             % (p["num_gpu_blocks"], 4096))
                    eng.info("distributed_gpu_executor.py:61", "Maximum concurrency for %d tokens per request: %.2fx"
                             % (self.max_model_len, p["max_concurrency"]))
            else:
                eng.info("kv_cache_utils.py:1316" if style == "ascend" else "kv_cache_utils.py:716",
                         "GPU KV cache size: {:,} tokens".format(p["kv_cache_tokens"]))
                eng.info("kv_cache_utils.py:1321" if style == "ascend" else "kv_cache_utils.py:720",
                         "Maximum concurrency for {:,} tokens per request: {:.2f}x".format(
                             self.max_model_len, p["max_concurrency"]))
        self._wait_ranks("G")
        self._mark("graph_captured", "ready")
        eng = Logger(style, log_lines.engine_prefix(style, self.pid, self.dp, topo.start_rank),
                     self.cfg.get("log_ansi"))
        eng.info("core.py:281" if style != "old" else "llm_engine.py:431",
                 "init engine (profile, create kv cache, warmup model) took %.2f seconds"
                 % (sim_clock.now() - self.started))
        if sim_root.fault(self.cfg, "never_ready"):
            self._mark("loaded-never-ready", "loaded", "loaded-never-ready")
            return None
        if self.node is not None:
            self.node.report_ready(self._rank_list())
        if self.head is not None:
            self._wait_remote_engines()
        if topo.role == "headless":  # engines only: ready once they are up and reported
            self.ready = True
            self._mark("ready", "ready", "ready")
            now = sim_clock.now()
            self._write_truth("ready", {"ready_at": now})
            work_timeline.record("service_startup", self.started, now, instance=self.instance, port=None,
                                 tp=self.tp, dp=self.dp, ok=True, role=topo.role)
            return None
        if topo.role == "secondary":  # its API server answers once the whole deployment is up
            while self.node.deployment_ready_at is None:
                self._check_failure()
                if self.stop_event.wait(0.05):
                    raise KeyboardInterrupt
        early = float(sim_root.fault(self.cfg, "ready_line_early", 0) or 0)
        uvicorn_level = getattr(self.args, "uvicorn_log_level", "info")
        if early > 0:  # the start-up lines come before the port answers
            log_lines.readiness(api, style, self.args.host or "0.0.0.0", self.args.port, self.pid,
                                self.profiler_enabled, uvicorn_level)
            time.sleep(early)
        srv = self._bind()
        self.ready = True
        self._mark("ready", "ready", "ready")
        if self.head is not None:
            self.head.announce_ready()
        now = sim_clock.now()
        self._write_truth("ready", {"ready_at": now})
        work_timeline.record("service_startup", self.started, now, instance=self.instance, port=self.args.port,
                             tp=self.tp, dp=self.dp, ok=True, role=topo.role)
        if early <= 0:
            log_lines.readiness(api, style, self.args.host or "0.0.0.0", self.args.port, self.pid,
                                self.profiler_enabled, uvicorn_level)
        if style == "new":
            api.info("loggers.py:147", "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d"
                     % self.plan["num_gpu_blocks"])
        return srv

    def _check_failure(self):
        """During start-up: a failure seen by a thread (a node lost, the head gone, a refused
        handshake) ends the start-up with it."""
        if self.head is not None and self.head.fatal:
            self._crash(self.head.fatal)
        if self.failure:
            self._crash(self.failure)

    def _wait_remote_engines(self):
        """The head's front end waits for every remote engine's hello and ready (vLLM prints the
        pending counts at DEBUG every multinode.startup_poll_s)."""
        self._write_truth()  # its engines are up (phase graph_captured): the wait for the others begins
        period = max(0.05, sim_root.multinode(self.cfg, "startup_poll_s"))
        next_log = sim_clock.now() + period
        while not self.head.all_ready():
            self._check_failure()
            if self.stop_event.wait(0.05):
                raise KeyboardInterrupt
            for rk in self.ranks:
                if rk["proc"].poll() is not None:
                    self._crash("RuntimeError: Engine core initialization failed. See root cause above. Failed core "
                                "proc(s): {'EngineCore_DP%d': 1}" % (rk["rank"] // self.tp))
            if sim_clock.now() >= next_log:
                new, connected = self.head.pending()
                if new:
                    self.api_log.debug("utils.py:930", "Waiting for 0 local, %d remote core engine proc(s) to "
                                       "connect." % new)
                if connected:
                    self.api_log.debug("utils.py:935", "Waiting for 0 local, %d remote core engine proc(s) to "
                                       "start." % connected)
                next_log += period
        self._check_failure()

    def _spawn_ranks(self, devices, step):
        pyroot = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = pyroot + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for r, dev in zip(self.plan["ranks"], devices):
            rfd, wfd = os.pipe()
            c = r["components_mb"]
            spec = {"rank": r["rank"], "tp_rank": r["tp_rank"], "dp_rank": r["dp_rank"], "tp": self.tp,
                    "dp": self.dp, "world": self.topo.world, "local_rank": r["rank"] - self.topo.rank_offset,
                    "ppid": self.pid, "fd": wfd, "style": self.style,
                    "ansi": self.cfg.get("log_ansi"), "startup": step, "model": self.model,
                    "loaded_before_s": self.loaded_before_join,
                    "printed": r["printed"], "shards": max(1, len([f for f in os.listdir(self.model)
                                                                   if f.endswith(".safetensors")])),
                    "ep_rank": r["rank"] if self.args.enable_expert_parallel else None,
                    "vision": bool(self.plan["model_config"].get("vision_config")),
                    "max_num_batched_tokens": self.args.max_num_batched_tokens or 8192,
                    "graph_sizes": int(self.cfg.get("graph_sizes", 35)),
                    "v0_profile": {"total_gib": dev["total_mb"] / 1024.0, "util": self.args.gpu_memory_utilization,
                                   "weights_gib": c["weights"] / 1024.0,
                                   "non_torch_gib": (c["hccl"] + c["runtime"] + c["slog"]) / 1024.0,
                                   "activation_gib": c["activation_peak"] / 1024.0}}
            # -S: a rank needs the standard library and npusim (on PYTHONPATH) only
            proc = subprocess.Popen([sys.executable, "-S", "-m", "npusim.rank_worker", json.dumps(spec)],
                                    pass_fds=(wfd,), env=env, stdin=subprocess.DEVNULL)
            os.close(wfd)
            self.ranks.append({"rank": r["rank"], "pid": proc.pid, "start": None, "device": dev["index"],
                               "proc": proc, "fd": rfd, "seen": ""})
        for rk in self.ranks:
            for _ in range(50):
                rk["start"] = sim_root.proc_start_time(rk["pid"])
                if rk["start"] is not None:
                    break
                time.sleep(0.01)
        if self.msprof:
            for rk in self.ranks:
                self.prof_dirs[rk["rank"]] = msprof_raw.create_prof(self.msprof["output"], rk["pid"], [rk["device"]])
        self._write_truth("starting", {"rank_pids": [rk["pid"] for rk in self.ranks], "ranks": self._rank_list()})
        self._write_instance()

    def _rank_list(self):
        return [{"rank": rk["rank"], "dp_rank": rk["rank"] // self.tp, "tp_rank": rk["rank"] % self.tp,
                 "device": rk["device"], "pid": rk["pid"]} for rk in self.ranks]

    def _wait_ranks(self, ch):
        while True:
            self._check_failure()
            if self.stop_event.is_set():
                break
            pending = [rk for rk in self.ranks if ch not in rk["seen"]]
            if not pending:
                return
            r, _, _ = select.select([rk["fd"] for rk in pending], [], [], 0.1)
            for rk in pending:
                if rk["fd"] in r:
                    data = os.read(rk["fd"], 16).decode()
                    if not data:
                        self._crash("RuntimeError: Worker process (rank %d, pid %d) died unexpectedly during "
                                    "start-up" % (rk["rank"], rk["pid"]))
                    rk["seen"] += data
        raise KeyboardInterrupt

    def _bind(self):
        host = self.cfg.get("bind_host", "127.0.0.1")
        try:
            return make_server(self, host, self.args.port)
        except OSError as e:
            self._crash("OSError: [Errno %d] error while attempting to bind on address ('%s', %d): %s"
                        % (e.errno or 98, self.args.host or "0.0.0.0", self.args.port, e.strerror))

    # ---- shutdown ------------------------------------------------------------
    def _cleanup(self):
        for rk in self.ranks:
            if rk["proc"].poll() is None:
                try:
                    rk["proc"].send_signal(signal.SIGTERM)
                except OSError:
                    pass
        deadline = sim_clock.now() + 5
        for rk in self.ranks:
            try:
                rk["proc"].wait(max(0.1, deadline - sim_clock.now()))
            except subprocess.TimeoutExpired:
                rk["proc"].kill()
                rk["proc"].wait()
        try:
            os.unlink(self.inst_path)
        except OSError:
            pass

    def shutdown(self, srv):
        api = self.api_log
        if srv is not None:
            srv.shutdown()
            srv.server_close()
        if srv is not None and log_lines.uvicorn_info(getattr(self.args, "uvicorn_log_level", "info")):
            err = sys.stdout if self.style == "ascend" else sys.stderr
            api.raw("INFO:     Shutting down", err)
            api.raw("INFO:     Waiting for application shutdown.", err)
            api.raw("INFO:     Application shutdown complete.", err)
            api.raw("INFO:     Finished server process [%d]" % self.pid, err)
        t_stop = self.stop_requested_at or sim_clock.now()
        with self.lock:
            self._mark("stopping", None, "stopping")
        if self.failure:
            api.error("core_client.py:564", self.failure)
        if self.head is not None:
            self.head.shutdown()  # the nodes stop too: each closes its link once its ranks are gone (bounded wait)
        self._cleanup()
        if self.node is not None:
            self.node.leave()
        with self.truth_lock:
            for fin, entry in self.finalisers:
                if fin.finished_at is None:
                    fin.abandon()
                    entry["abandoned"] = True
        with self.lock:
            self.phases.mark("stopped", "base")
        extra = {"stopped_at": sim_clock.now(), "requests": self.requests_total}
        if self.failure:
            extra["error"] = self.failure
        try:
            if self.msprof and self.msprof.get("memory") and self.plan:
                freq = int(self.msprof.get("sys_hardware_mem_freq", 50))
                # msprof keeps sampling (the freed devices) until its own flush ends
                series = self.phases.series(sim_clock.now() + sim_root.delay(self.cfg, "msprof_flush", 0.1))
                msprof_series.write(self.prof_dirs, self.plan, series, freq)
                extra["msprof_series"] = msprof_series.truth(series, freq, self.phases.inference_windows())
        except OSError as e:
            sys.stderr.write("msprof data write failed: %s\n" % e)
        if self.truth is not None:
            self._write_truth("failed" if self.failure else "stopped", extra)
        work_timeline.record("service_shutdown", t_stop, sim_clock.now(), instance=self.instance, port=self.args.port)
        return 1 if self.failure else 0


def _hccl_buffsize(svc):
    """The service's HCCL_BUFFSIZE (MB per HCCL buffer), None when unset; HCCL refuses anything but
    a positive whole number."""
    text = os.environ.get("HCCL_BUFFSIZE")
    if text is None or text == "":
        return None
    if not text.isdigit() or int(text) <= 0:
        svc._crash("RuntimeError: HCCL_BUFFSIZE=%r is invalid: it must be a positive whole number of MB" % text)
    return int(text)


def run(args, entry):
    try:
        topo = dp_topology.Topology(args)
    except dp_topology.TopologyError as e:
        sys.stderr.write("Traceback (most recent call last):\n  File \"/usr/local/bin/vllm\", line 8, in <module>\n"
                         "    sys.exit(main())\n%s\n" % e)
        return 1
    svc = Service(args, entry, topo)

    def on_signal(_s, _f):
        if svc.stop_requested_at is None:
            svc.stop_requested_at = sim_clock.now()
        svc.stop_event.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    srv = None
    try:
        srv = svc.startup()
        if srv is not None:
            serve_in_thread(srv)
        while not svc.stop_event.wait(0.2):
            for rk in svc.ranks:
                if rk["proc"].poll() is not None:
                    svc.api_log.error("core.py:700", "Worker proc rank %d died unexpectedly, shutting down executor."
                                      % rk["rank"])
                    if svc.topo.multinode:  # the rest of the deployment cannot go on without it
                        svc.fail("RuntimeError: worker proc rank %d died unexpectedly" % rk["rank"])
                    svc.stop_event.set()
    except KeyboardInterrupt:
        pass
    if svc.dying:
        svc.die()
        return 1
    return svc.shutdown(srv)


def main_serve(argv):
    from .serve_args import parse_serve
    try:
        args = parse_serve(argv)
    except sim_root.SimError as e:
        sys.stderr.write(str(e) + "\n")
        return 1
    args.raw_argv = list(argv)
    return _run_checked(args, "serve")


def main_api_server(argv):
    from .serve_args import parse_api_server
    args = parse_api_server(argv)
    args.raw_argv = list(argv)
    return _run_checked(args, "api_server")


def _run_checked(args, entry):
    from . import serve_profiler
    pc = getattr(args, "profiler_config", None)
    if isinstance(pc, dict):
        try:
            cfg = sim_root.load_config()
        except (sim_root.SimError, OSError, ValueError):
            cfg = {}
        bad = serve_profiler.unknown_keys(pc, cfg)
        if bad:  # vLLM builds ProfilerConfig from the JSON at start-up: an unknown key ends it there
            sys.stderr.write("pydantic_core._pydantic_core.ValidationError: 1 validation error for ProfilerConfig: "
                             "unexpected keyword argument(s) %s\n" % ", ".join(bad))
            return 1
    try:
        return run(args, entry)
    except sim_root.SimError as e:
        sys.stderr.write(str(e) + "\n")
        return 1

