"""Requests and torch profiling of a simulated `vllm serve` (a mixin of
serve_main.Service).

Two levels, as in vLLM:
  * the API server (run_request, profile_control) answers HTTP: it picks
    the DP rank of each request (round robin over the deployment's DP
    ranks; over its own only in hybrid load balancing), and on a
    multi-node head it forwards the request, the request wave and the
    profiler calls to the nodes (dp_head.py);
  * the engines (execute, wave, profile_local) run what reaches this
    node: a request's generation on one DP rank, the activation memory of
    the wave (every DP engine steps while any request runs, so every
    node's HBM shows it), and each rank's *_ascend_pt at /stop_profile
    with the kernels of the requests its DP rank ran."""
import json
import os
import signal
import time

from . import (bulk_rows, kernel_model, operator_memory_model, sim_clock, sim_root, torch_finalise,
               torch_profile_writer, work_timeline)

REQUESTS_LOG_MAX = 1000  # requests kept in truth.requests_log / engine_requests_log


class RequestsMixin:
    def init_requests(self):
        self.requests_total = 0        # answered by this node's API server
        self.requests_log = []
        self.engine_requests = 0       # run by this node's engines
        self.engine_requests_log = []
        self.profile_sessions = []
        self.finalisers = []           # [(RankFinalise, truth entry)]
        self.chat_seen = 0
        self.next_dp = 0
        self.wave_in_flight = 0
        self.profiling = False
        self.window = []               # API-level requests started while profiling
        self.engine_window = []        # requests this node's engines ran while profiling
        self.window_start = 0.0

    # ---- API level -------------------------------------------------------------
    def _pick_dp_rank(self):
        t = self.topo
        ranks = t.local_dp_ranks if (t.hybrid or t.role != "head") else list(range(t.dp))
        d = ranks[self.next_dp % len(ranks)]
        self.next_dp += 1
        return d

    def run_request(self, kind, prompt_tokens, completion_tokens):
        """One request through this API server -> True when it succeeded."""
        forward = self.head is not None and not self.topo.hybrid
        with self.lock:
            self.requests_total += 1
            index = self.requests_total - 1
            fail = False
            if kind == "chat":
                ratio = float(sim_root.fault(self.cfg, "chat_fail_ratio", 0) or 0)
                i = self.chat_seen
                self.chat_seen += 1
                fail = int((i + 1) * ratio) > int(i * ratio)
            dp_rank = self._pick_dp_rank()
            now = sim_clock.now()
            rec = {"kind": kind, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                   "t_start": now, "ok": not fail, "dp_rank": dp_rank}
            self._wave_started(now)
            self.wave_in_flight += 1
            wave_start = self.wave_in_flight == 1
            if self.profiling:
                self.window.append(rec)
        if forward and wave_start:
            self.head.broadcast({"type": "busy"})
        if self.topo.owns_dp_rank(dp_rank):
            ok = self.execute(kind, prompt_tokens, completion_tokens, dp_rank, not fail)["ok"]
        else:
            tok = sim_root.delay(self.cfg, "token", 0.001)
            budget = min(5.0, sim_root.delay(self.cfg, "prefill", 0.005) + tok * completion_tokens)
            answer = self.head.forward_request(dp_rank, {"kind": kind, "prompt_tokens": prompt_tokens,
                                                         "completion_tokens": completion_tokens, "ok": not fail},
                                               budget + sim_root.multinode(self.cfg, "control_timeout_s"))
            ok = bool(answer and answer.get("ok"))
            if answer:
                rec["served_by"] = {"node_rank": answer.get("node_rank"), "start": answer.get("start"),
                                    "end": answer.get("end")}
        with self.lock:
            rec["ok"] = ok
            rec["t_end"] = end = sim_clock.now()
            self.wave_in_flight -= 1
            wave_end = self.wave_in_flight == 0
            self._wave_ended(end)
            if self.leak and self.leak["mb_per_request"]:
                self._write_instance()  # npu-smi counts the requests answered
            if len(self.requests_log) < REQUESTS_LOG_MAX:
                self.requests_log.append({"i": index, "kind": kind, "ok": ok, "start": round(rec["t_start"], 6),
                                          "end": round(end, 6), "prompt_tokens": prompt_tokens,
                                          "completion_tokens": completion_tokens, "dp_rank": dp_rank})
            if index == 0:
                self._write_truth(None, {"first_request_end_at": round(end, 6)})
        if forward and wave_end:
            self.head.broadcast({"type": "idle"})
        work_timeline.record("request", rec["t_start"], end, port=self.args.port, kind=kind, ok=ok,
                             prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, dp_rank=dp_rank)
        return ok

    def _wave_started(self, now):
        """Under self.lock: a request starts on the deployment (this node's devices hold activation)."""
        first = self.phase == "ready"
        changed = self.phases.request_started(now)
        if first:
            self._mark_state("inferred")
            self._write_truth("ready", {"first_request_at": round(now, 6)})
        elif changed:
            self._write_instance()

    def _wave_ended(self, end):
        if self.phases.request_ended(end):
            self._write_instance()

    def wave(self, busy):
        """A node: the head's request wave started (busy) or ended."""
        with self.lock:
            now = sim_clock.now()
            if busy:
                self._wave_started(now)
            else:
                self._wave_ended(now)
                if self.truth is not None and self.truth.get("first_request_end_at") is None:
                    self._write_truth(None, {"first_request_end_at": round(now, 6)})

    def _mark_state(self, state):
        self.phase = state
        self._write_instance()

    # ---- engine level ----------------------------------------------------------
    def execute(self, kind, prompt_tokens, completion_tokens, dp_rank, ok=True):
        """Generate one request on the local DP rank dp_rank -> its engine record."""
        with self.lock:
            self.engine_requests += 1
            n = self.engine_requests
            rec = {"kind": kind, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                   "t_start": sim_clock.now(), "ok": ok, "dp_rank": dp_rank}
            if self.profiling:
                self.engine_window.append(rec)
        tok = sim_root.delay(self.cfg, "token", 0.001)
        time.sleep(min(5.0, sim_root.delay(self.cfg, "prefill", 0.005) + tok * completion_tokens))
        with self.lock:
            rec["t_end"] = sim_clock.now()
            if len(self.engine_requests_log) < REQUESTS_LOG_MAX:
                self.engine_requests_log.append({"i": n - 1, "kind": kind, "ok": ok, "dp_rank": dp_rank,
                                                 "start": round(rec["t_start"], 6), "end": round(rec["t_end"], 6),
                                                 "prompt_tokens": prompt_tokens,
                                                 "completion_tokens": completion_tokens})
        if self.node is not None:  # the API server's node records its own in run_request
            work_timeline.record("request", rec["t_start"], rec["t_end"], port=None, kind=kind, ok=ok,
                                 prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, dp_rank=dp_rank)
        limit = sim_root.fault(self.cfg, "die_after_requests")
        if limit is not None and limit is not False and n >= int(limit):
            self.dying = True
            self.stop_event.set()
        return rec

    # ---- profiling -------------------------------------------------------------
    def profile_control(self, start):
        t0 = sim_clock.now()
        code, msg = self._profile_control(start)
        work_timeline.record("profile_start" if start else "profile_stop", t0, sim_clock.now(), port=self.args.port,
                             code=code)
        return code, msg

    def _profile_control(self, start):
        forward = self.head is not None and not self.topo.hybrid
        if start:
            code, msg = self.profile_local(True)
            if code == 200 and forward:
                code, msg = self.head.profile_all("start")
            if code == 200:
                self.api_log.info("api_server.py:1054", "Starting profiler...")
            return code, msg
        with self.lock:
            wrote = self.profiling and any(r.get("ok") for r in self.window)
        code, msg = self.profile_local(False, write=wrote)
        if code == 200 and forward:
            code, msg = self.head.profile_all("stop", write=wrote)
        if code == 200:
            self.api_log.info("api_server.py:1062", "Stopping profiler...")
        return code, msg

    def profile_local(self, start, write=False):
        """This node's engines start / stop their profilers; at a stop with `write` (the deployment
        ran a request in the window) each local rank writes its *_ascend_pt."""
        slow = float(sim_root.fault(self.cfg, "slow_profile_control", 0) or 0)
        if slow:
            time.sleep(slow)
        if start:
            if sim_root.fault(self.cfg, "start_profile_500"):
                return 500, "Failed to start profiler: simulated failure"
            with self.lock:
                self.profiling = True
                self.window = []
                self.engine_window = []
                self.window_start = sim_clock.now()
            return 200, ""
        if sim_root.fault(self.cfg, "stop_profile_500"):
            return 500, "Failed to stop profiler: simulated failure"
        with self.lock:
            was, reqs = self.profiling, [r for r in self.engine_window if r.get("ok")]
            self.profiling = False
            self.window = []
            self.engine_window = []
        if was and write:
            self._write_profiles(reqs, sim_clock.now())
        return 200, ""

    def _write_profiles(self, reqs, t_stop):
        """Begin every profiled rank's *_ascend_pt and start its finalise (torch_finalise.py); each
        rank's kernels are those of the requests its DP rank ran."""
        skip = sim_root.parse_rank_list(sim_root.fault(self.cfg, "rank_no_profile"))
        no_kd = sim_root.parse_rank_list(sim_root.fault(self.cfg, "rank_no_kernel_details"))
        no_tv = sim_root.parse_rank_list(sim_root.fault(self.cfg, "rank_no_trace_view"))
        hang = sim_root.parse_rank_list(sim_root.fault(self.cfg, "finalise_hang"))
        delays = self.cfg.get("delays", {}).get("finalise")
        os.makedirs(self.profiler_dir, exist_ok=True)
        session = {"start_at": round(self.window_start, 6), "stop_at": round(t_stop, 6), "requests": len(reqs),
                   "kernel_slow": kernel_model.settings(self.cfg)["slow"], "ranks": []}
        started = []
        for rk in self.ranks:
            if rk["rank"] in skip:
                continue
            r = rk["rank"]
            mine = [q for q in reqs if q.get("dp_rank", r // self.tp) == r // self.tp]
            trace = torch_profile_writer.begin_rank(
                self.profiler_dir, r, rk["pid"], rk["device"], self.tp, self.window_start,
                naming=self.cfg.get("profile_dir_naming", "host"), host=self.cfg.get("hostname"))
            tasks = kernel_model.tasks(mine, self.plan["model_config"], self.tp, rk["device"], self.cfg, rank=r)
            total_rows = bulk_rows.rows_for(self.cfg, r)
            bulk = max(0, total_rows - len(tasks)) if total_rows is not None and tasks else 0
            entry = {"rank": r, "dp_rank": r // self.tp, "device": rk["device"], "pid": rk["pid"],
                     "dir": trace["path"], "requests": len(mine),
                     "finalise_delay_s": sim_root.per_rank(delays, r, 0.0), "hang": r in hang,
                     "finalised_at": None, "abandoned": False, "device_data": r not in no_kd,
                     "framework_ops": r not in no_tv,
                     "kernels": ((bulk_rows.summary(tasks, bulk) if bulk else kernel_model.summary(tasks))
                                 if r not in no_kd else []),
                     "bulk_rows": bulk if r not in no_kd else 0,
                     # the rank's kernel window on this host's clock (µs), as kernel_details.csv will hold it
                     "kernels_first_start_us": min(t["start_us"] for t in tasks) if tasks else None,
                     "kernels_last_end_us": ((bulk_rows.last_end_us(tasks, bulk) if bulk else
                                              round(max(t["start_us"] + t["dur_us"] for t in tasks), 3))
                                             if tasks else None)}
            if getattr(self, "profiler_with_memory", False):
                entry["operator_memory"] = self._operator_memory_plan(trace, rk, t_stop)
            fin = torch_finalise.RankFinalise(
                trace, torch_profile_writer.cpu_ops(mine, rk["pid"]), tasks, entry["finalise_delay_s"],
                entry["hang"], t_stop, framework_ops=entry["framework_ops"], device_data=entry["device_data"],
                with_stack=self.profiler_with_stack, on_done=lambda f, e=entry: self._finalised(f, e),
                bulk=bulk, raw_bytes_per_row=bulk_rows.settings(self.cfg)["raw_bytes_per_row"])
            session["ranks"].append(entry)
            started.append((fin, entry))
        with self.truth_lock:
            self.profile_sessions.append(session)
            self.finalisers += started
            self._write_truth(None, {"profile_dirs": (self.truth.get("profile_dirs") or [])
                                     + [e["dir"] for _f, e in started]})
        for fin, _e in started:
            fin.start()

    def _operator_memory_plan(self, trace, rk, t_stop):
        """torch_profiler_with_memory: the rank's operators in the window (operator_memory_model.py),
        kept in FRAMEWORK/ for analyse(); -> the truth (plus the fault the rank's CSVs get, if any)."""
        base = 0.0
        for pr in self.plan["ranks"]:
            if pr["rank"] == rk["rank"]:
                base = pr["components_mb"]["weights"] + pr["components_mb"]["kv_cache"]
        p = operator_memory_model.plan(rk["rank"], rk["device"], self.window_start * 1e6, t_stop * 1e6,
                                       self.plan["activation_mb"], base, self.cfg)
        faults = sim_root.fault(self.cfg, "operator_memory_csv") or {}
        p["fault"] = faults.get(str(rk["rank"])) if isinstance(faults, dict) else None
        with open(os.path.join(trace["path"], "FRAMEWORK", operator_memory_model.PLAN_FILE), "w") as f:
            json.dump(p, f)
        return dict(p["truth"], fault=p["fault"])

    def _finalised(self, fin, entry):
        with self.truth_lock:
            entry["finalised_at"] = round(fin.finished_at, 6)
            self._write_truth()

    # ---- fault die_after_requests ------------------------------------------------
    def die(self):
        """The node's engines die at once (SIGKILL), the process reports it and exits 1: no goodbye
        to the rest of the deployment (its connections just drop)."""
        for rk in self.ranks:
            try:
                os.kill(rk["pid"], signal.SIGKILL)
            except OSError:
                pass
        for rk in self.ranks:
            rk["proc"].wait()
        dead = self.ranks[0]["rank"] if self.ranks else 0
        self.api_log.error("core.py:700", "Worker proc rank %d died unexpectedly, shutting down executor." % dead)
        self.api_log.error("core.py:1035", "EngineCore encountered a fatal error (fault die_after_requests=%s)."
                           % sim_root.fault(self.cfg, "die_after_requests"))
        if self.truth is not None:
            self._write_truth("crashed", {"error": "die_after_requests", "stopped_at": sim_clock.now(),
                                          "requests": self.requests_total})
        try:
            os.unlink(self.inst_path)
        except OSError:
            pass
