"""Multi-node data-parallel deployments on several simulated hosts
(127.0.0.2, 127.0.0.3, 127.0.0.4), each started with the simulator's own
`vllm serve`: the head serves only once every node's engines joined it over
TCP, requests and profiler calls reach every node, each node keeps its own
devices, profile directories and ground truth; faults: a node that never
joins, a node that dies mid-workload, a node's rank without a profile."""
import calendar
import glob
import json
import os
import signal
import time
import unittest

from .test_hbm_series import series
from .sim_harness import (PROFILE_CFG, SimTestCase, complete, api_and_rpc_ports, http, parse_npu_smi, small_model,
                               wait_for)

ADDRS = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


class MultiNodeCase(SimTestCase):
    def nodes(self, n, **kw):
        per = kw.pop("per_node", {})
        return [self.make_node("node%d" % i, ADDRS[i], **dict(kw, **per.get(i, {}))) for i in range(n)]

    def node_argv(self, i, n, tp, dp_local, rpc_port, api_port, model=None, address=None, headless=True,
                  extra=()):
        """The command line of node i (0 = head) of an n-node deployment."""
        argv = ["vllm", "serve", model or small_model(), "--served-model-name", "m", "-tp", str(tp),
                "--data-parallel-size", str(n * dp_local), "--data-parallel-size-local", str(dp_local),
                "--data-parallel-address", address or ADDRS[0], "--data-parallel-rpc-port", str(rpc_port),
                "--profiler-config", PROFILE_CFG]
        if i == 0:
            argv += ["--port", str(api_port)]
        else:
            argv += ["--data-parallel-start-rank", str(i * dp_local)]
            argv += ["--headless"] if headless else ["--port", str(api_port + i)]
        return argv + list(extra)

    def launch(self, targets, tp=1, dp_local=2, model=None, address=None, extra=(), wait=True, only=None):
        """Start every node of the deployment (the head first), each in its own working dir;
        -> (processes, api port, rpc port)."""
        n = len(targets)
        api, rpc = api_and_rpc_ports()
        procs = []
        for i, t in enumerate(targets):
            if only is not None and i not in only:
                procs.append(None)
                continue
            cwd = os.path.join(self.tmp, "cwd%d" % i)
            os.makedirs(cwd, exist_ok=True)
            devs = ",".join(str(d) for d in range(tp * dp_local))
            procs.append(self.start(self.node_argv(i, n, tp, dp_local, rpc, api, model, address, extra=extra),
                                    devices=devs, name="node%d" % i, target=t, cwd=cwd))
        if wait:
            self.wait_ready(procs[0], api, timeout=60)
        return procs, api, rpc

    def phase_is(self, target, phase):
        """The target's newest truth when its last phase is `phase`, else None."""
        d = target["truth_dir"]
        files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
        if not files:
            return None
        t = self.truth(target)
        return t if t.get("phases") and t["phases"][-1]["phase"] == phase else None

    def prof_dirs(self, i):
        return sorted(glob.glob(os.path.join(self.tmp, "cwd%d" % i, "vllm_profile", "*_ascend_pt")))

    def assert_gone(self, procs, timeout=20):
        for p in procs:
            if p is not None:
                p.wait(timeout)

    def stop_all(self, procs):
        """SIGTERM to the head: it tells every node to stop; -> exit codes."""
        procs[0].send_signal(signal.SIGTERM)
        return [p.wait(30) if p is not None else None for p in procs]


class TwoNodes(MultiNodeCase):
    def test_health_only_after_every_node_joined_and_work_reaches_every_node(self):
        targets = self.nodes(2)
        procs, api, rpc = self.launch(targets, only=[0], wait=False)
        # The head's own engines come up, but it does not serve until the remote engines join.
        head_truth = wait_for(lambda: self.phase_is(targets[0], "graph_captured"), 30, "head engines up")
        self.assertEqual(head_truth["deployment"]["engines"], {"0": "local", "1": "local", "2": "new", "3": "new"})
        with self.assertRaises(OSError):
            http("GET", api, "/health", timeout=1)
        os.makedirs(os.path.join(self.tmp, "cwd1"), exist_ok=True)
        procs[1] = self.start(self.node_argv(1, 2, 1, 2, rpc, api), devices="0,1", name="node1", target=targets[1],
                              cwd=os.path.join(self.tmp, "cwd1"))
        self.wait_ready(procs[0], api, timeout=60)
        head, node = self.truth(targets[0]), self.truth(targets[1])
        self.assertEqual(head["status"], "ready")
        self.assertEqual(head["deployment"]["role"], "head")
        self.assertEqual(head["deployment"]["bound"], "%s:%d" % (ADDRS[0], rpc))
        self.assertEqual([n["engines"] for n in head["deployment"]["nodes"]], [[2, 3]])
        self.assertEqual(head["deployment"]["nodes"][0]["address"], ADDRS[1])
        self.assertEqual(node["deployment"]["role"], "headless")
        self.assertEqual(node["deployment"]["connected_to"], "%s:%d" % (ADDRS[0], rpc))
        self.assertEqual([r["rank"] for r in head["ranks"]], [0, 1])
        self.assertEqual([r["rank"] for r in node["ranks"]], [2, 3])
        self.assertLessEqual(node["deployment"]["ready_at"], head["ready_at"] + 1.0)
        # Each host's npu-smi lists its own ranks and their HBM.
        for t, truth in ((targets[0], head), (targets[1], node)):
            devs, ps = parse_npu_smi(self.npu_smi(t))
            self.assertEqual(sorted(p["pid"] for p in ps), sorted(truth["rank_pids"]))
            for d in (0, 1):
                self.assertEqual(devs[d]["used"], truth["per_device"][str(d)]["npu_smi"]["after_ready_mb"])
        out, _ = self.logs(procs[1])
        self.assertIn("Launching 2 data parallel engine(s) in headless mode, with head node address tcp://%s:%d."
                      % (ADDRS[0], rpc), out)
        self.assertRegex(out, r"\(Worker_DP3_TP0 pid=\d+\) INFO .*world_size=4 rank=3 local_rank=1")
        # Profile a workload: requests go through the head, round robin over the four DP ranks.
        self.assertEqual(http("POST", api, "/start_profile")[0], 200)
        for _ in range(8):
            self.assertEqual(complete(api, max_tokens=3), 200)
        self.assertEqual(http("POST", api, "/stop_profile")[0], 200)
        head, node = self.truth(targets[0]), self.truth(targets[1])
        self.assertEqual(head["requests"], 8)
        self.assertEqual(sorted(r["dp_rank"] for r in head["requests_log"]), [0, 0, 1, 1, 2, 2, 3, 3])
        self.assertEqual(sorted(r["dp_rank"] for r in head["engine_requests_log"]), [0, 0, 1, 1])
        self.assertEqual(sorted(r["dp_rank"] for r in node["engine_requests_log"]), [2, 2, 3, 3])
        # Every rank writes its own *_ascend_pt on its own host, with the kernels of its requests.
        for i, truth in ((0, head), (1, node)):
            dirs = self.prof_dirs(i)
            self.assertEqual(len(dirs), 2, dirs)
            self.assertEqual(sorted(dirs), sorted(truth["profile_dirs"]))
            for d in dirs:
                self.assertTrue(os.path.basename(d).startswith("node%d_" % i), d)
            ranks = truth["profile_sessions"][0]["ranks"]
            self.assertEqual([r["requests"] for r in ranks], [2, 2])
            self.assertTrue(all(r["kernels"] for r in ranks))
        for d, rk in zip(self.prof_dirs(1), sorted(node["profile_sessions"][0]["ranks"], key=lambda r: r["dir"])):
            self.assertIn("_%d_" % rk["pid"], os.path.basename(d))
        # Both hosts ran the request wave: their HBM shows the activation peak.
        for t, truth in ((targets[0], head), (targets[1], node)):
            devs, _ = parse_npu_smi(self.npu_smi(t))
            self.assertEqual(devs[0]["used"], truth["per_device"]["0"]["npu_smi"]["after_inference_mb"])
            self.assertIn("inference", [p["phase"] for p in truth["phases"]])
        # Stopping the head stops the whole deployment; every node exits 0.
        self.assertEqual(self.stop_all(procs), [0, 0])
        self.assertEqual(self.truth(targets[1])["status"], "stopped")
        self.assertEqual(self.truth(targets[0])["deployment"]["nodes"][0]["left"], "shutdown")
        for t in targets:
            self.assertEqual(parse_npu_smi(self.npu_smi(t))[1], [])

    def test_msprof_wrapping_a_headless_node_sees_that_nodes_series(self):
        targets = self.nodes(2, token_delay=0.004)
        api, rpc = api_and_rpc_ports()
        procs = []
        for i, t in enumerate(targets):
            cwd = os.path.join(self.tmp, "cwd%d" % i)
            os.makedirs(cwd, exist_ok=True)
            argv = self.node_argv(i, 2, 1, 1, rpc, api)
            if i == 1:  # as the memory workflow wraps a service: msprof app mode around `vllm serve`
                argv = ["msprof", "--output=%s" % os.path.join(cwd, "msprof_data"), "--sys-hardware-mem=on",
                        "--sys-hardware-mem-freq=50", "--task-time=off", "--ai-core=off", "--ascendcl=off"] + argv
            procs.append(self.start(argv, devices="0", name="node%d" % i, target=t, cwd=cwd))
        self.wait_ready(procs[0], api, timeout=60)
        self.assertEqual(complete(api, max_tokens=64), 200)   # DP rank 0, on the head: the wave reaches node 1
        self.assertEqual(self.stop_all(procs), [0, 0])
        node = self.truth(targets[1])
        self.assertEqual(node["engine_requests"], 0)
        wins = node["msprof_series"]["inference_windows"]
        self.assertEqual(len(wins), 1)
        self.assertGreater(wins[0]["samples"], 0)
        rows = series(os.path.join(self.tmp, "cwd1", "msprof_data"), 0)
        self.assertEqual(max(kb for _t, kb in rows) // 1024, node["per_device"]["0"]["npu_smi"]["inference_peak_mb"])
        self.assertEqual(series(os.path.join(self.tmp, "cwd0", "msprof_data"), 0), [])  # nothing on the head

    def test_node_dying_mid_workload_fails_the_head(self):
        targets = self.nodes(2, per_node={1: {"faults": ["die_after_requests=1"]}})
        procs, api, _rpc = self.launch(targets, tp=1, dp_local=1)
        self.assertEqual(complete(api), 200)          # DP rank 0, on the head
        self.assertEqual(complete(api), 200)          # DP rank 1: the node's first and last request
        self.assertEqual(procs[1].wait(20), 1)
        self.assertEqual(procs[0].wait(20), 1)
        _, err = self.logs(procs[0])
        self.assertRegex(err, r"ERROR .*remote engine core\(s\) \[1\] on node 1 \(127\.0\.0\.3, pid \d+\) died "
                              r"unexpectedly")
        _, err1 = self.logs(procs[1])
        self.assertIn("EngineCore encountered a fatal error", err1)
        self.assertEqual(self.truth(targets[1])["status"], "crashed")
        self.assertEqual(self.truth(targets[0])["status"], "failed")
        with self.assertRaises(OSError):
            http("GET", api, "/health", timeout=1)
        for t in targets:
            self.assertEqual(parse_npu_smi(self.npu_smi(t))[1], [])

    def test_rank_without_profile_directory_on_one_node(self):
        targets = self.nodes(2, per_node={1: {"faults": ["rank_no_profile=3"]}})
        procs, api, _rpc = self.launch(targets, tp=1, dp_local=2)
        self.assertEqual(http("POST", api, "/start_profile")[0], 200)
        for _ in range(4):
            self.assertEqual(complete(api), 200)
        self.assertEqual(http("POST", api, "/stop_profile")[0], 200)
        self.assertEqual(len(self.prof_dirs(0)), 2)
        self.assertEqual(len(self.prof_dirs(1)), 1)
        self.assertEqual([r["rank"] for r in self.truth(targets[1])["profile_sessions"][0]["ranks"]], [2])
        self.assertEqual(self.stop_all(procs), [0, 0])

    def test_headless_node_stopped_by_signal_exits_cleanly_and_the_head_fails(self):
        targets = self.nodes(2)
        procs, api, _rpc = self.launch(targets, tp=1, dp_local=1)
        self.assertEqual(self.stop(procs[1]), 0)
        self.assertEqual(procs[0].wait(20), 1)
        _, err = self.logs(procs[0])
        self.assertRegex(err, r"remote engine core\(s\) \[1\] on node 1 .* stopped")
        self.assertEqual(self.truth(targets[1])["status"], "stopped")


class NeverJoins(MultiNodeCase):
    target_kwargs = {"sets": ["multinode.join_timeout_s=1.5"]}

    def assert_never_ready(self, procs, api, node_error):
        self.assertEqual(procs[1].wait(30), 1)           # the node gives up after join_timeout_s
        _, err = self.logs(procs[1])
        self.assertIn(node_error, err)
        self.assertIn("could not join the data parallel deployment", err)
        with self.assertRaises(OSError):
            http("GET", api, "/health", timeout=1)
        self.assertIsNone(procs[0].poll())                 # the head still waits, never ready
        self.assertEqual(self.truth()["status"], "starting")
        self.assertEqual(self.stop(procs[0]), 0)

    def test_wrong_port_never_joins(self):
        targets = self.nodes(2, per_node={1: {"faults": ["never_join=wrong_port"]}})
        procs, api, rpc = self.launch(targets, wait=False)
        self.assert_never_ready(procs, api, "could not reach the data parallel head at tcp://%s:%d"
                                % (ADDRS[0], rpc + 1))
        self.assertEqual(self.truth(targets[0])["deployment"]["engines"]["2"], "new")

    def test_loopback_address_reaches_only_the_node_itself(self):
        # Given 127.0.0.1 the head binds its own address, and each node looks for it on itself.
        targets = self.nodes(2)
        procs, api, rpc = self.launch(targets, address="127.0.0.1", wait=False)
        self.assert_never_ready(procs, api, "could not reach the data parallel head at tcp://127.0.0.1:%d" % rpc)
        self.assertEqual(self.truth(targets[0])["deployment"]["bound"], "%s:%d" % (ADDRS[0], rpc))

    def test_node_that_never_tries_leaves_the_head_waiting(self):
        targets = self.nodes(2, per_node={1: {"faults": ["never_join"]}})
        procs, api, _rpc = self.launch(targets, wait=False)
        wait_for(lambda: self.phase_is(targets[0], "graph_captured"), 30, "head engines up")
        node = wait_for(lambda: self.phase_is(targets[1], "starting"), 30, "node started")
        self.assertEqual(node["deployment"]["join_attempts"], 0)
        with self.assertRaises(OSError):
            http("GET", api, "/health", timeout=1)
        self.assertEqual(self.stop(procs[1]), 0)       # stopped while waiting: clean
        self.assertEqual(self.stop(procs[0]), 0)

    def test_head_told_another_hosts_address_cannot_bind(self):
        targets = self.nodes(2)
        procs, _api, _rpc = self.launch(targets, address=ADDRS[1], wait=False, only=[0])
        self.assertEqual(procs[0].wait(30), 1)
        _, err = self.logs(procs[0])
        self.assertIn("zmq.error.ZMQError: Cannot assign requested address (addr='tcp://%s:" % ADDRS[1], err)


class ThreeNodes(MultiNodeCase):
    def test_three_nodes_expert_parallel_over_all_nodes(self):
        targets = self.nodes(3, per_node={2: {"clock_offset_s": 3.2}})
        model = small_model("moe", layers=3, experts=8, hidden=512, moe_intermediate=256, vocab=8000,
                            intermediate=1024)
        procs, api, _rpc = self.launch(targets, tp=2, dp_local=1, model=model, extra=["--enable-expert-parallel"])
        truths = [self.truth(t) for t in targets]
        for i, t in enumerate(truths):
            self.assertEqual(t["ep"], 6)
            self.assertEqual(t["weights"]["ep"], 6)
            self.assertEqual([r["rank"] for r in t["ranks"]], [2 * i, 2 * i + 1])
            self.assertEqual(t["deployment"]["node_rank"], i)
        self.assertEqual(truths[0]["weights"]["per_device_mb"], truths[2]["weights"]["per_device_mb"])
        out2, _ = self.logs(procs[2])
        self.assertRegex(out2, r"\(Worker_DP2_TP1_EP5 pid=\d+\) INFO ")
        self.assertEqual(http("POST", api, "/start_profile")[0], 200)
        for _ in range(3):
            self.assertEqual(complete(api, max_tokens=2), 200)
        self.assertEqual(http("POST", api, "/stop_profile")[0], 200)
        for i, t in enumerate(targets):
            self.assertEqual(len(self.prof_dirs(i)), 2)
            self.assertEqual([r["dp_rank"] for r in self.truth(t)["engine_requests_log"]], [i])
        # Node 2's clock runs 3.2 s ahead: its request started "later" than the head saw it start.
        head, n2 = self.truth(targets[0]), self.truth(targets[2])
        sent = [r for r in head["requests_log"] if r["dp_rank"] == 2][0]
        ran = n2["engine_requests_log"][0]
        self.assertAlmostEqual(ran["start"] - sent["start"], 3.2, delta=0.5)
        self.assertEqual(n2["deployment"]["clock_offset_s"], 3.2)
        self.assertEqual(self.stop_all(procs), [0, 0, 0])


class HybridLoadBalancing(MultiNodeCase):
    def test_secondary_node_runs_its_own_api_server_for_its_ranks(self):
        targets = self.nodes(2)
        api, rpc = api_and_rpc_ports(api_span=2)
        procs = []
        for i, t in enumerate(targets):
            cwd = os.path.join(self.tmp, "cwd%d" % i)
            os.makedirs(cwd, exist_ok=True)
            argv = self.node_argv(i, 2, 1, 1, rpc, api, headless=False)
            if i == 0:
                argv.append("--data-parallel-hybrid-lb")
            procs.append(self.start(argv, devices="0", name="node%d" % i, target=t, cwd=cwd))
        self.wait_ready(procs[0], api, timeout=60)
        self.wait_ready(procs[1], api + 1, timeout=30)
        self.assertEqual(self.truth(targets[1])["deployment"]["role"], "secondary")
        self.assertEqual(http("POST", api + 1, "/start_profile")[0], 200)
        self.assertEqual(complete(api + 1), 200)
        self.assertEqual(http("POST", api + 1, "/stop_profile")[0], 200)
        self.assertEqual(len(self.prof_dirs(1)), 1)
        self.assertEqual(self.prof_dirs(0), [])
        self.assertEqual([r["dp_rank"] for r in self.truth(targets[1])["engine_requests_log"]], [1])
        self.assertEqual(self.stop_all(procs), [0, 0])


class Clock(SimTestCase):
    def test_date_and_every_timestamp_follow_the_offset(self):
        self.make_target(clock_offset_s=3.2)
        t0 = time.time()
        r = self.sh("date +%s%N; date +%s.%N; date -u '+%Y-%m-%d %H:%M:%S'; date -d @0 +%s; LC_ALL=C date -u")
        t1 = time.time()
        self.assertEqual(r.returncode, 0, r.stderr)
        ns, dotted, human, epoch0, plain = r.stdout.split("\n")[:5]
        mid = (t0 + t1) / 2
        self.assertAlmostEqual(int(ns) / 1e9 - mid, 3.2, delta=(t1 - t0) / 2 + 0.05)
        self.assertAlmostEqual(float(dotted) - mid, 3.2, delta=(t1 - t0) / 2 + 0.05)
        self.assertAlmostEqual(calendar.timegm(time.strptime(human, "%Y-%m-%d %H:%M:%S")) - mid, 3.2,
                               delta=(t1 - t0) / 2 + 1.05)  # whole seconds
        self.assertAlmostEqual(calendar.timegm(time.strptime(plain, "%a %b %d %H:%M:%S UTC %Y")) - mid, 3.2,
                               delta=(t1 - t0) / 2 + 1.05)
        self.assertEqual(epoch0, "0")                      # an explicit date is not shifted
        # A service on this host: truth, timeline and kernel timestamps are on its clock.
        p, port = self.serve(profile=True)
        before = time.time()
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        self.assertEqual(complete(port), 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        after = time.time()
        truth = self.truth()
        self.assertEqual(truth["deployment"]["clock_offset_s"], 3.2)
        req = truth["requests_log"][0]
        self.assertGreater(req["start"], before + 3.2 - 0.05)
        self.assertLess(req["end"], after + 3.2 + 0.05)
        self.assertTrue(any(x["what"] == "request" and abs(x["start"] - req["start"]) < 1e-3
                            for x in self.timeline()))
        self.assertEqual(self.stop(p), 0)


class ClockOffsetRead(unittest.TestCase):
    """sim_clock reads clock.offset_s without the json module when the config has
    target_setup's layout, and the same value as a full parse in every case."""

    def test_fast_read_equals_a_full_parse(self):
        from npusim import sim_clock
        configs = [{"a": "x", "clock": {"offset_s": 3.2}, "network": {"address": "127.0.0.1"}},
                   {"clock": {"offset_s": -0.125}},
                   {"clock": {"offset_s": 0.0, "note": "a second key"}},
                   {"clock": {"offset_s": None}},
                   {"clock": {"other": 1, "offset_s": 7.5}},   # offset_s not first: full parse
                   {"faults": {"text": "\n  \"clock\": {\n    \"offset_s\": 9"}, "clock": {"offset_s": 1.5}},
                   {"nested": {"clock": {"offset_s": 4.0}}},    # not the top-level key
                   {}]
        for cfg in configs:
            for text in (json.dumps(cfg, indent=2), json.dumps(cfg)):
                want = float((cfg.get("clock") or {}).get("offset_s") or 0.0)
                self.assertEqual(sim_clock._offset_in(text), want, text)


if __name__ == "__main__":
    unittest.main()
