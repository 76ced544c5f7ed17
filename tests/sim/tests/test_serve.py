"""vllm serve / api_server: flags, start-up logs, HTTP, per-rank processes on
npu-smi, ground truth consistent with npu-smi and the logs, profiler dirs,
analyse(), clean exit."""
import glob
import json
import os
import re
import signal
import time
import unittest

from .sim_harness import SimTestCase, free_port, http, parse_npu_smi, small_model
from npusim.sim_root import pid_alive

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RE_WEIGHTS_GB = re.compile(r"Loading model weights took ([0-9.]+) GB")
RE_WEIGHTS_GIB = re.compile(r"Model loading took ([0-9.]+) GiB and ([0-9.]+) seconds")
RE_KV = re.compile(r"Available KV cache memory: (-?[0-9.]+) GiB")
RE_KV_TOKENS = re.compile(r"GPU KV cache size: ([0-9,]+) tokens")
RE_GRAPH = re.compile(r"Graph capturing finished in (\d+) secs, took ([0-9.]+) GiB")
RE_PREFIX = re.compile(r"^(\((?:VllmWorker rank=\d+|Worker(?:_DP\d+)?_TP\d+(?:_EP\d+)?|EngineCore(?:_DP\d+)?|APIServer) pid=(\d+)\) )?"
                       r"(INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] ")
PROFILE_CFG = '{"profiler":"torch","torch_profiler_dir":"./vllm_profile","torch_profiler_with_stack":false}'


def lines(text):
    return [ANSI.sub("", l) for l in re.split(r"[\r\n]+", text) if l]


class ServeAscendStyleTP2(SimTestCase):
    def test_full_lifecycle(self):
        self.make_target(layout="910B3", devices=8)
        model = small_model()
        port = free_port()
        p = self.start(["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(port), "--served-model-name", "m",
                        "--tensor-parallel-size", "2", "--max-model-len", "4096", "--gpu-memory-utilization", "0.85",
                        "--trust-remote-code", "--max-num-seqs", "2", "--max-num-batched-tokens", "1024",
                        "--compilation-config", '{"cudagraph_mode":"FULL_DECODE_ONLY"}', "--profiler-config",
                        PROFILE_CFG], devices="2,3")
        self.wait_ready(p, port)
        code, models = http("GET", port, "/v1/models")
        self.assertEqual((code, models["data"][0]["id"]), (200, "m"))
        truth = self.truth()
        self.assertEqual(truth["devices"], [2, 3])
        self.assertEqual(len(truth["rank_pids"]), 2)

        # npu-smi after ready: rank pids listed on their devices, totals = truth
        devs, procs = parse_npu_smi(self.npu_smi())
        for dev in (2, 3):
            t = truth["per_device"][str(dev)]
            self.assertEqual(devs[dev]["used"], t["npu_smi"]["after_ready_mb"])
        self.assertEqual(devs[0]["used"], 2862)
        self.assertEqual(sorted(pp["pid"] for pp in procs), sorted(truth["rank_pids"]))
        self.assertEqual({pp["npu"] for pp in procs}, {2, 3})
        self.assertTrue(all(pp["name"].startswith("python") for pp in procs))

        # inference: completions + chat (text and image)
        code, body = http("POST", port, "/v1/completions", {"model": "m", "prompt": "hello there world",
                                                           "max_tokens": 7})
        self.assertEqual(code, 200)
        self.assertEqual(body["usage"], {"prompt_tokens": 3, "completion_tokens": 7, "total_tokens": 10,
                                         "prompt_tokens_details": None})
        self.assertEqual(len(body["choices"][0]["text"].split()), 7)
        devs, _ = parse_npu_smi(self.npu_smi())
        for dev in (2, 3):
            t = truth["per_device"][str(dev)]
            self.assertEqual(devs[dev]["used"], t["npu_smi"]["after_inference_mb"])
            self.assertGreater(t["npu_smi"]["after_inference_mb"], t["npu_smi"]["after_ready_mb"])
            self.assertAlmostEqual(sum(t["components_mb"].values()), t["npu_smi"]["after_inference_mb"], places=6)
            self.assertLess(abs(t["components_mb"]["residual"] - 37), 1.0)
        msg = [{"role": "user", "content": [{"type": "text", "text": "describe this"},
                                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
        code, body = http("POST", port, "/v1/chat/completions", {"model": "m", "messages": msg, "max_tokens": 3})
        self.assertEqual(code, 200)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["usage"]["completion_tokens"], 3)
        self.assertGreater(body["usage"]["prompt_tokens"], 256)
        code, _ = http("POST", port, "/v1/completions", {"model": "nope", "prompt": "x"})
        self.assertEqual(code, 404)

        # profiler window with requests -> one *_ascend_pt per rank
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        for _ in range(3):
            self.assertEqual(http("POST", port, "/v1/chat/completions",
                                  {"model": "m", "messages": [{"role": "user", "content": "hi " * 50}],
                                   "max_tokens": 4})[0], 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        pts = sorted(glob.glob(os.path.join(self.tmp, "vllm_profile", "*_ascend_pt")))
        self.assertEqual(len(pts), 2)
        for pt in pts:
            name = os.path.basename(pt)
            self.assertRegex(name, r"^.+_\d+_\d{17}_ascend_pt$")
            self.assertTrue(glob.glob(os.path.join(pt, "profiler_info_*.json")))
            self.assertTrue(os.path.isfile(os.path.join(pt, "profiler_metadata.json")))
            self.assertTrue(os.path.isdir(os.path.join(pt, "FRAMEWORK")))
            profs = glob.glob(os.path.join(pt, "PROF_*"))
            self.assertEqual(len(profs), 1)
            self.assertRegex(os.path.basename(profs[0]), r"^PROF_\d{6}_\d{17}_\d{8}[A-R]{8}$")
            self.assertEqual(len(glob.glob(os.path.join(profs[0], "device_*", "data"))), 1)

        # analyse() from the target's environment
        r = self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s')\""
                    % os.path.join(self.tmp, "vllm_profile"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("Start parsing profiling data in sync mode at: "), 2)
        self.assertRegex(r.stdout, r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] \[INFO\] \[\d+\] profiler.py: All profiling "
                                   r"data parsed in a total time of \d+:\d\d:\d\d")
        with open(os.path.join(os.path.dirname(__file__), "data", "kernel_details.header.csv")) as f:
            real_header = f.read().strip()
        for pt in pts:
            out = os.path.join(pt, "ASCEND_PROFILER_OUTPUT")
            with open(os.path.join(out, "kernel_details.csv")) as f:
                kd = f.read().splitlines()
            self.assertEqual(kd[0], real_header)
            self.assertGreater(len(kd), 10)
            self.assertIn("hcom_allReduce", "\n".join(kd))
            with open(os.path.join(out, "trace_view.json")) as f:
                trace = json.load(f)
            self.assertIsInstance(trace, list)
            self.assertTrue(any(e.get("ph") == "X" and isinstance(e.get("ts"), str) for e in trace))

        # clean exit on SIGTERM; ranks gone; npu-smi back to baseline
        self.assertEqual(self.stop(p), 0)
        for pid in truth["rank_pids"]:
            self.assertFalse(pid_alive(pid), "rank %d still running" % pid)
        devs, procs = parse_npu_smi(self.npu_smi())
        self.assertEqual([d["used"] for d in devs], [2862] * 8)
        self.assertEqual(procs, [])
        final = self.truth()
        self.assertEqual(final["status"], "stopped")
        self.assertGreaterEqual(final["requests"], 5)

        # logs: real formats, consistent with truth
        out, err = self.logs(p)
        ls = lines(out)
        for l in ls:
            if not l.startswith("(APIServer pid=%d) INFO:  " % p.pid):
                self.assertRegex(l, RE_PREFIX)
        w = [RE_WEIGHTS_GB.search(l) for l in ls if "Loading model weights took" in l]
        self.assertEqual(len(w), 2)  # every rank prints it on vllm-ascend
        self.assertEqual({m.group(1) for m in w}, {final["per_device"]["2"]["printed"]["weights_gib"]})
        self.assertAlmostEqual(float(w[0].group(1)) * 1024, final["per_device"]["2"]["components_mb"]["weights"],
                               delta=0.06)
        kv = [RE_KV.search(l) for l in ls if RE_KV.search(l)]
        self.assertEqual(len(kv), 1)  # info_once: first rank only
        self.assertEqual(float(kv[0].group(1)) * 1024, final["per_device"]["3"]["components_mb"]["kv_cache"])
        tok = [RE_KV_TOKENS.search(l) for l in ls if RE_KV_TOKENS.search(l)]
        self.assertEqual(int(tok[0].group(1).replace(",", "")), final["kv_cache_tokens"])
        self.assertIn(",", tok[0].group(1))
        g = [RE_GRAPH.search(l) for l in ls if RE_GRAPH.search(l)]
        self.assertEqual(float(g[0].group(2)) * 1024, final["per_device"]["2"]["components_mb"]["graph_capture"])
        self.assertIn("Starting vLLM server on http://0.0.0.0:%d" % port, out)
        self.assertIn("Application startup complete.", out)
        self.assertIn("Loading safetensors checkpoint shards", err)


class ServeOtherStyles(SimTestCase):
    def _run(self, style, argv, devices, eager=False):
        self.make_target(log_style=style)
        port = free_port()
        p = self.start(argv + ["--port", str(port)] + (["--enforce-eager"] if eager else []), devices=devices)
        self.wait_ready(p, port)
        code, _ = http("POST", port, "/v1/completions", {"model": argv[argv.index("--served-model-name") + 1]
                                                        if "--served-model-name" in argv else self.model,
                                                        "prompt": "a b", "max_tokens": 2})
        self.assertEqual(code, 200)
        self.assertEqual(self.stop(p, signal.SIGINT), 0)
        out, err = self.logs(p)
        return p, out, err, self.truth()

    def test_new_style_tp2_vllmworker_prefix(self):
        self.model = small_model()
        p, out, err, truth = self._run("new", ["vllm", "serve", self.model, "-tp", "2"], "0,1")
        ls = lines(out)
        w = [l for l in ls if RE_WEIGHTS_GIB.search(l)]
        self.assertEqual(len(w), 2)
        self.assertTrue(all(re.match(r"\(VllmWorker rank=\d pid=\d+\) INFO ", l) for l in w))
        self.assertIn("\x1b[1;36m(VllmWorker rank=0", out)  # prefix colour is written even into files
        self.assertEqual(len([l for l in ls if RE_KV.search(l)]), 2)  # every worker before v0.11.1
        self.assertEqual(len([l for l in ls if RE_GRAPH.search(l)]), 2)
        self.assertIn("Starting vLLM API server 0 on http://0.0.0.0:", out)
        self.assertEqual(truth["served_model_name"], self.model)  # default served name = model path
        self.assertEqual(truth["status"], "stopped")

    def test_uvicorn_log_level_warning_hides_its_info_lines(self):
        self.model = small_model()
        p, out, err, truth = self._run("new", ["vllm", "serve", self.model, "--uvicorn-log-level", "warning"], "0")
        self.assertEqual(truth["status"], "stopped")
        self.assertIn("Starting vLLM API server 0 on http://0.0.0.0:", out)  # vLLM's own lines stay
        for line in ("Application startup complete.", "Started server process", "Application shutdown complete."):
            self.assertNotIn(line, out + err)

    def test_old_style_api_server_entry_point(self):
        self.model = small_model()
        p, out, err, truth = self._run("old", ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model",
                                               self.model, "--served-model-name", "old", "-tp", "2"], "4,5",
                                       eager=True)
        ls = lines(out)
        self.assertEqual(truth["entry"], "api_server")
        self.assertEqual(truth["devices"], [4, 5])
        self.assertEqual(len([l for l in ls if RE_WEIGHTS_GB.search(l)]), 2)
        self.assertTrue(any(re.match(r"^INFO \d\d-\d\d \d\d:\d\d:\d\d model_runner\.py:\d+\] Loading model weights", l)
                            for l in ls), "driver rank has no prefix and no [file] brackets")
        self.assertTrue(any(l.startswith("(VllmWorkerProcess pid=") for l in ls))
        self.assertEqual([l for l in ls if RE_GRAPH.search(l)], [])  # --enforce-eager
        self.assertEqual(truth["per_device"]["4"]["components_mb"]["graph_capture"], 0.0)
        self.assertRegex(out, r"the rest of the memory reserved for KV Cache is [0-9.]+GiB\.")
        self.assertIn("\r\n", out)  # multi-line message continuation
        self.assertIn("Uvicorn running on", err)

    def test_dp2_ep_devices_and_truth(self):
        self.make_target(log_style="ascend")
        model = small_model("moe", layers=3, experts=8, hidden=512, moe_intermediate=256, vocab=8000,
                            intermediate=1024)
        port = free_port()
        p = self.start(["vllm", "serve", model, "--port", str(port), "-tp", "2", "-dp", "2",
                        "--enable-expert-parallel", "--served-model-name", "moe"], devices="0,1,2,3")
        self.wait_ready(p, port)
        truth = self.truth()
        self.assertEqual(truth["ep"], 4)
        self.assertEqual(len(truth["rank_pids"]), 4)
        self.assertEqual(self.stop(p), 0)
        out, _ = self.logs(p)
        self.assertRegex(out, r"\(Worker_DP1_TP1_EP3 pid=\d+\) INFO ")
        self.assertRegex(out, r"\(EngineCore_DP1 pid=\d+\) INFO .*GPU KV cache size")


class ServeVisionModel(SimTestCase):
    def test_vision_model_logs_encoder_budget_and_takes_images(self):
        self.make_target()
        model = small_model("vision", layers=2, hidden=512, intermediate=1024, vocab=8000, heads=8, kv_heads=2,
                            head_dim=64, vision_depth=2, vision_hidden=256, vision_intermediate=512)
        port = free_port()
        p = self.start(["vllm", "serve", model, "--port", str(port), "--served-model-name", "vl",
                        "--max-num-batched-tokens", "16384"], devices="0")
        self.wait_ready(p, port)
        msg = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                                            {"type": "text", "text": "what is this"}]}]
        code, body = http("POST", port, "/v1/chat/completions", {"model": "vl", "messages": msg, "max_tokens": 4})
        self.assertEqual(code, 200)
        self.assertEqual(body["usage"]["prompt_tokens"], 256 + 3 + 4)
        self.assertEqual(self.stop(p), 0)
        out, _ = self.logs(p)
        self.assertIn("Encoder cache will be initialized with a budget of 16384 tokens", out)
        self.assertRegex(out, r"Qwen2_5_VLForConditionalGeneration model \(layers: 2\) with 35 sizes")
        self.assertIn("vision_encoder", self.truth()["weights"]["by_category"])


class ServeCli(SimTestCase):
    def test_unknown_flag_rejected(self):
        self.make_target()
        r = self.run_tool(["vllm", "serve", small_model(), "--no-such-flag"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("unrecognized arguments: --no-such-flag", r.stderr)
        r = self.run_tool(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "x", "--bogus", "1"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("unrecognized arguments", r.stderr)

    def test_bad_json_flag_rejected(self):
        self.make_target()
        r = self.run_tool(["vllm", "serve", small_model(), "--compilation-config", "{not json"])
        self.assertEqual(r.returncode, 2)

    def test_missing_model_dir_fails_fast(self):
        self.make_target()
        r = self.run_tool(["vllm", "serve", os.path.join(self.tmp, "nope")], timeout=20)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not a local folder", r.stderr)

    def test_profile_routes_404_without_profiler(self):
        self.make_target()
        port = free_port()
        p = self.start(["vllm", "serve", small_model(), "--port", str(port)], devices="0")
        self.wait_ready(p, port)
        self.assertEqual(http("POST", port, "/start_profile")[0], 404)
        code, _ = http("POST", port, "/v1/completions", {"model": small_model(), "prompt": "x " * 5000,
                                                         "max_tokens": 10})
        self.assertEqual(code, 400)  # longer than max model len
        self.assertEqual(self.stop(p), 0)

    def test_no_requests_in_window_writes_no_profile(self):
        self.make_target()
        port = free_port()
        p = self.start(["vllm", "serve", small_model(), "--port", str(port), "--profiler-config", PROFILE_CFG],
                       devices="0")
        self.wait_ready(p, port)
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        self.assertEqual(glob.glob(os.path.join(self.tmp, "vllm_profile", "*_ascend_pt")), [])
        self.assertEqual(self.stop(p), 0)

    def test_several_served_names(self):
        self.make_target()
        port = free_port()
        p = self.start(["vllm", "serve", small_model(), "--port", str(port), "--served-model-name", "a", "b"],
                       devices="0")
        self.wait_ready(p, port)
        code, models = http("GET", port, "/v1/models")
        self.assertEqual([m["id"] for m in models["data"]], ["a", "b"])
        self.assertEqual(http("POST", port, "/v1/completions", {"model": "b", "prompt": "x", "max_tokens": 1})[0], 200)
        self.assertEqual(self.stop(p), 0)

    def test_310p_two_chips_memory_usage_follows_truth(self):
        self.make_target(layout="310P3", devices=4)
        port = free_port()
        p = self.start(["vllm", "serve", small_model(), "--port", str(port), "-tp", "2", "--served-model-name", "m"],
                       devices="0,1")
        self.wait_ready(p, port)
        truth = self.truth()
        devs, procs = parse_npu_smi(self.npu_smi())
        self.assertEqual([devs[i]["used"] for i in (0, 1)],
                         [truth["per_device"][str(i)]["npu_smi"]["after_ready_mb"] for i in (0, 1)])
        self.assertEqual(sorted((pp["npu"], pp["chip"]) for pp in procs), [(0, 0), (0, 1)])
        self.assertEqual(truth["per_device"]["1"]["hbm_total_mb"], 43693)
        self.assertEqual(self.stop(p), 0)

    def test_set_env_script_is_enough(self):
        self.make_target()
        r = self.sh("command -v vllm && command -v msprof && command -v npu-smi && "
                    "python3 -c 'import torch_npu, vllm; print(torch_npu.__version__)'")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_sigkill_leaves_no_phantom_memory(self):
        self.make_target()
        port = free_port()
        p = self.start(["vllm", "serve", small_model(), "--port", str(port)], devices="1")
        self.wait_ready(p, port)
        truth = self.truth()
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        deadline = time.time() + 5
        while time.time() < deadline:
            devs, procs = parse_npu_smi(self.npu_smi())
            if devs[1]["used"] == 2862 and not procs:
                break
            time.sleep(0.1)
        self.assertEqual(devs[1]["used"], 2862)
        self.assertEqual(procs, [])
        del truth


if __name__ == "__main__":
    unittest.main()
