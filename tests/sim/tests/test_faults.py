"""Every fault a test can choose in config.json behaves as documented."""
import glob
import json
import os
import re
import time
import unittest

from .sim_harness import SimTestCase, free_port, http, parse_npu_smi, small_model

PROFILE_CFG = '{"profiler":"torch","torch_profiler_dir":"./vllm_profile"}'


class ServiceFaults(SimTestCase):
    def serve(self, faults, tp=1, profile=False, devices=None, sets=()):
        self.make_target(faults=faults, sets=sets)
        port = free_port()
        argv = ["vllm", "serve", small_model(), "--port", str(port), "-tp", str(tp), "--served-model-name", "m"]
        if profile:
            argv += ["--profiler-config", PROFILE_CFG]
        return self.start(argv, devices=devices or ",".join(str(i) for i in range(tp))), port

    def test_never_ready(self):
        p, port = self.serve(["never_ready"])
        time.sleep(1.5)
        self.assertIsNone(p.poll())
        with self.assertRaises(OSError):
            http("GET", port, "/health", timeout=1)
        devs, procs = parse_npu_smi(self.npu_smi())
        self.assertEqual(len(procs), 1)  # the rank holds its device while loading
        self.assertGreater(devs[0]["used"], 2862)
        out, _ = self.logs(p)
        self.assertNotIn("Application startup complete", out)
        self.assertEqual(self.stop(p), 0)

    def test_crash_on_start_known_env_errors(self):
        for value, text in ((None, "ModuleNotFoundError: No module named 'vllm_ascend'"),
                            ("torch_npu", "ModuleNotFoundError: No module named 'torch_npu'"),
                            ("libhccl", "libhccl.so: cannot open shared object file"),
                            ("device_type", "RuntimeError: Failed to infer device type")):
            with self.subTest(value=value):
                p, _port = self.serve(["crash_on_start" + ("=" + value if value else "")])
                self.assertEqual(p.wait(15), 1)
                _, err = self.logs(p)
                self.assertIn("Traceback (most recent call last):", err)
                self.assertIn(text, err)
                self.assertEqual(os.listdir(os.path.join(self.target["root"], "state", "instances")), [])

    def test_no_kv_memory_crash(self):
        self.make_target(hbm_total_mb=4096)
        p = self.start(["vllm", "serve", small_model()], devices="0")
        self.assertEqual(p.wait(15), 1)
        self.assertIn("No available memory for the cache blocks", self.logs(p)[1])

    def test_negative_kv_logged_with_another_process_counted(self):
        # Another user's process holds 30000 MB on device 0: vLLM counts it in
        # its budget, logs the negative KV memory, then refuses to start.
        self.make_target(busy=["0:proc=30000"])
        p = self.start(["vllm", "serve", small_model(), "--gpu-memory-utilization", "0.5"], devices="0")
        self.assertEqual(p.wait(15), 1)
        out, err = self.logs(p)
        m = re.search(r"Available KV cache memory: (-[0-9.]+) GiB", out + err)
        self.assertIsNotNone(m, out + err)
        self.assertLess(float(m.group(1)), 0)
        self.assertIn("ValueError: No available memory for the cache blocks", err)

    def test_chat_fail_ratio(self):
        p, port = self.serve(["chat_fail_ratio=0.5"])
        self.wait_ready(p, port)
        codes = [http("POST", port, "/v1/chat/completions",
                      {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})[0]
                 for _ in range(10)]
        self.assertEqual(codes.count(500), 5)
        self.assertEqual(codes.count(200), 5)
        self.assertEqual(http("POST", port, "/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 2})[0], 200)
        self.assertEqual(self.stop(p), 0)

    def test_profile_control_500(self):
        for fault, start_code, stop_code in (("start_profile_500", 500, 200), ("stop_profile_500", 200, 500)):
            with self.subTest(fault=fault):
                p, port = self.serve([fault], profile=True)
                self.wait_ready(p, port)
                code, body = http("POST", port, "/start_profile")
                self.assertEqual(code, start_code)
                if code == 500:
                    self.assertIn("Failed to start profiler", body["error"]["message"])
                self.assertEqual(http("POST", port, "/stop_profile")[0], stop_code)
                self.assertEqual(self.stop(p), 0)

    def test_slow_profile_control(self):
        p, port = self.serve(["slow_profile_control=0.8"], profile=True)
        self.wait_ready(p, port)
        t0 = time.time()
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        self.assertGreaterEqual(time.time() - t0, 0.75)
        self.assertEqual(self.stop(p), 0)

    def _profile(self, faults, tp=2, sets=()):
        p, port = self.serve(faults, tp=tp, profile=True, sets=sets)
        self.wait_ready(p, port)
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        self.assertEqual(http("POST", port, "/v1/completions", {"model": "m", "prompt": "x y", "max_tokens": 3})[0], 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        self.assertEqual(self.stop(p), 0)
        root = os.path.join(self.tmp, "vllm_profile")
        r = self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s')\"" % root)
        self.assertEqual(r.returncode, 0)
        out = {}
        for pt in sorted(glob.glob(os.path.join(root, "*_ascend_pt"))):
            rank = int(glob.glob(os.path.join(pt, "profiler_info_*.json"))[0].rsplit("_", 1)[1].split(".")[0])
            o = os.path.join(pt, "ASCEND_PROFILER_OUTPUT")
            out[rank] = (os.path.isfile(os.path.join(o, "kernel_details.csv")),
                         os.path.isfile(os.path.join(o, "trace_view.json")))
        return out, r.stdout

    def test_rank_without_ascend_pt(self):
        out, _ = self._profile(["rank_no_profile=1"])
        self.assertEqual(out, {0: (True, True)})

    def test_rank_without_kernel_details(self):
        out, log = self._profile(["rank_no_kernel_details=0"])
        self.assertEqual(out, {0: (False, True), 1: (True, True)})
        self.assertIn("[WARNING]", log)

    def test_rank_without_trace_view(self):
        out, _ = self._profile(["rank_no_trace_view=1"])
        self.assertEqual(out, {0: (True, True), 1: (True, False)})

    def test_analyse_delay_and_invocation_log(self):
        t0 = time.time()
        out, log = self._profile([], sets=["delays.analyse=0.4"])
        self.assertEqual(out, {0: (True, True), 1: (True, True)})
        root = os.path.join(self.tmp, "vllm_profile")
        pts = sorted(glob.glob(os.path.join(root, "*_ascend_pt")))
        for pt in pts:
            with open(os.path.join(pt, ".sim_analyse_invocations")) as f:
                recs = [json.loads(l) for l in f if l.strip()]
            self.assertEqual(len(recs), 1, pt)
            self.assertEqual(recs[0]["path"], pt)
            self.assertGreater(recs[0]["pid"], 0)
            self.assertGreaterEqual(os.path.getmtime(os.path.join(pt, "ASCEND_PROFILER_OUTPUT", "analyse.done")),
                                    recs[0]["time"] + 0.4 - 0.05)
        self.assertGreaterEqual(time.time() - t0, 0.8)  # two dirs, 0.4 s each
        # a second analyse() of one directory appends a second line there only
        r = self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s')\"" % pts[0])
        self.assertEqual(r.returncode, 0, r.stderr)
        counts = []
        for pt in pts:
            with open(os.path.join(pt, ".sim_analyse_invocations")) as f:
                counts.append(sum(1 for l in f if l.strip()))
        self.assertEqual(counts, [2, 1])

    def test_analyse_without_msprof_gives_no_kernel_details(self):
        out, log = self._profile(["msprof_missing"], tp=1)
        self.assertEqual(out, {0: (False, True)})
        self.assertIn("'msprof' command not found", log)


class SetupCli(SimTestCase):
    def test_unknown_fault_rejected(self):
        with self.assertRaises(ValueError):
            self.make_target(faults=["no_such_fault"])

    def test_setup_target_script(self):
        import json
        import subprocess
        import sys
        from .sim_harness import SIM_DIR
        root = os.path.join(self.tmp, "t")
        r = subprocess.run([sys.executable, os.path.join(SIM_DIR, "setup_target.py"), "--root", root, "--layout", "A3",
                            "--devices", "4", "--busy", "1:hbm", "--fault", "chat_fail_ratio=0.25",
                            "--set", "memory.activation_mb=250", "--baseline-mb", "3000,3001,3002,3003"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        desc = json.loads(r.stdout)
        self.assertEqual([d["baseline_mb"] for d in desc["devices"]], [3000, 3001, 3002, 3003])
        with open(desc["config"]) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["faults"], {"chat_fail_ratio": 0.25})
        self.assertEqual(cfg["memory"]["activation_mb"], 250)
        self.assertTrue(os.path.isfile(os.path.join(root, "set_env.sh")))


if __name__ == "__main__":
    unittest.main()
