"""The target's own time: state/timeline.jsonl logs each piece of work the
target did (start-up, requests, profiler control, finalise, shutdown,
msprof flush/export, analyse()); slow env script and login rc; changing a
target's config in place between runs (--update)."""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

from .sim_harness import PROFILE_CFG, SIM_DIR, SimTestCase, complete, http
from npusim import work_timeline


class WorkTimeline(SimTestCase):
    def test_every_piece_of_target_work_is_logged(self):
        self.make_target(export_delay=0.3)
        p, port, out_dir = self.serve_under_msprof(tp=2, extra=["--profiler-config", "'%s'" % PROFILE_CFG])
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        for tokens in (3, 4, 5):
            self.assertEqual(complete(port, max_tokens=tokens), 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        self.assertEqual(http("POST", port, "/v1/completions", {"model": "nope", "prompt": "x"})[0], 404)
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), 0)
        self.assertEqual(self.run_tool(["msprof", "--export=on", "--output=%s" % out_dir]).returncode, 0)
        r = self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s')\""
                    % os.path.join(self.tmp, "vllm_profile"))
        self.assertEqual(r.returncode, 0, r.stderr)
        log = self.timeline()
        kinds = [e["what"] for e in log]
        for what, n in (("service_startup", 1), ("request", 3), ("profile_start", 1), ("profile_stop", 1),
                        ("torch_finalise", 2), ("service_shutdown", 1), ("msprof_flush", 1),
                        ("msprof_auto_export", 1), ("msprof_export", 1), ("analyse", 2)):
            self.assertEqual(kinds.count(what), n, what)
        for e in log:
            self.assertLessEqual(e["start"], e["end"], e)
            self.assertAlmostEqual(e["dur_s"], e["end"] - e["start"], places=5)
        one = {e["what"]: e for e in log}
        truth = self.truth()
        self.assertTrue(one["service_startup"]["ok"])
        self.assertEqual(one["service_startup"]["instance"], truth["instance"])
        self.assertAlmostEqual(one["service_startup"]["end"], truth["ready_at"], delta=0.05)
        reqs = [e for e in log if e["what"] == "request"]
        self.assertEqual([e["completion_tokens"] for e in reqs], [3, 4, 5])
        self.assertEqual([(e["start"], e["end"]) for e in reqs],
                         [(q["start"], q["end"]) for q in truth["requests_log"]])
        self.assertTrue(all(one["service_startup"]["end"] <= e["start"] and e["end"] <= one["service_shutdown"]["start"]
                            for e in reqs))
        self.assertLessEqual(one["service_shutdown"]["end"], one["msprof_flush"]["start"] + 0.001)
        self.assertGreaterEqual(one["msprof_export"]["dur_s"], 0.3)
        self.assertEqual(sorted(e["path"] for e in log if e["what"] == "analyse"),
                         sorted(x["dir"] for x in truth["profile_sessions"][0]["ranks"]))
        # Each tool's own start (interpreter, imports) is the target's work too, and ends where the tool's
        # first piece begins.
        starts = [e for e in log if e["what"].endswith("_process_start")]
        self.assertEqual(sorted({e["what"] for e in starts}),
                         ["analyse_process_start", "msprof_process_start", "service_process_start"])
        self.assertEqual(sorted(e.get("mode") for e in starts if e["what"] == "msprof_process_start"),
                         ["application", "export"])
        (svc,) = [e for e in starts if e["what"] == "service_process_start"]
        self.assertAlmostEqual(svc["end"], one["service_startup"]["start"], delta=0.001)
        self.assertGreater(svc["dur_s"], 0.01)  # at least the interpreter's start
        for e in starts:
            self.assertLess(e["dur_s"], 30)

    def test_a_tool_call_is_logged_from_its_process_start(self):
        self.make_target()
        t0 = time.time()
        r = self.run_tool(["npu-smi", "info"])
        t1 = time.time()
        self.assertEqual(r.returncode, 0, r.stderr)
        (e,) = self.timeline()
        self.assertEqual((e["what"], e["args"]), ("npu_smi", "info"))
        self.assertGreaterEqual(e["start"], t0 - 0.05)  # /proc's clock ticks: 10 ms
        self.assertLessEqual(e["end"], t1)
        self.assertGreater(e["dur_s"], 0.01)

    def test_the_process_start_is_the_fork_time(self):
        before = time.time()
        out = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import time; "
                              "from npusim import work_timeline; print(work_timeline.process_start_time())"
                              % os.path.join(SIM_DIR, "python")], capture_output=True, text=True, timeout=30)
        started = float(out.stdout)
        self.assertGreaterEqual(started, before - 0.05)
        self.assertLessEqual(started, time.time())

    def test_failed_start_up_is_logged_too(self):
        self.make_target(faults=["crash_on_start=torch_npu"])
        p = self.start(["vllm", "serve", os.path.join(self.tmp, "m")], devices="0")
        self.assertEqual(p.wait(20), 1)
        start, e = self.timeline()
        self.assertEqual(start["what"], "service_process_start")
        self.assertEqual((e["what"], e["ok"]), ("service_startup", False))
        self.assertIn("torch_npu", e["error"])

    def test_torn_lines_are_skipped_when_read(self):
        self.make_target()
        work_timeline.record("request", 1.0, 2.0, root=self.target["root"], kind="chat")
        with open(work_timeline.path(self.target["root"]), "a") as f:
            f.write('{"what": "req')
        self.assertEqual([e["what"] for e in self.timeline()], ["request"])


class SlowShells(SimTestCase):
    def _time_bash(self, script, env=None):
        t0 = time.time()
        r = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return time.time() - t0, r.stdout

    def test_env_script_and_login_rc_cost_what_they_are_told(self):
        self.make_target(env_delay=0.3, login_delay=0.4)
        took, out = self._time_bash(". '%s' && echo $NPUPROF_SIM_ROOT" % self.target["set_env"])
        self.assertGreaterEqual(took, 0.3)
        self.assertEqual(out.strip(), self.target["root"])
        env = dict(os.environ, BASH_ENV=self.target["login_rc"])  # what `SetEnv BASH_ENV=…` in sshd_config does
        took, _ = self._time_bash("true", env)
        self.assertGreaterEqual(took, 0.4)
        with open(self.target["login_rc"]) as f:
            self.assertIn("sleep 0.4", f.read())

    def test_default_scripts_do_not_sleep(self):
        self.make_target()
        for path in (self.target["set_env"], self.target["login_rc"]):
            with open(path) as f:
                self.assertNotIn("sleep", f.read())


class UpdateInPlace(SimTestCase):
    def _setup(self, *args):
        return subprocess.run([sys.executable, os.path.join(SIM_DIR, "setup_target.py")] + list(args),
                              capture_output=True, text=True, timeout=60)

    def test_update_changes_only_what_it_is_told(self):
        root = os.path.join(self.tmp, "t")
        self.assertEqual(self._setup("--root", root, "--devices", "4", "--fault", "chat_fail_ratio=0.5",
                                     "--finalise-delay", "0,2.5", "--activation", "released").returncode, 0)
        with open(os.path.join(root, "state", "config.json")) as f:
            before = json.load(f)
        self.assertEqual(before["delays"]["finalise"], [0.0, 2.5])
        self.assertTrue(before["memory"]["activation_release"])
        r = self._setup("--root", root, "--update", "--set", 'kernels.slow={"MatMulV3": 2}', "--fault",
                        "finalise_hang=1", "--set", "delays.env_script=0.2")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(root, "state", "config.json")) as f:
            after = json.load(f)
        self.assertEqual(after["kernels"]["slow"], {"MatMulV3": 2})
        self.assertEqual(after["faults"], {"chat_fail_ratio": 0.5, "finalise_hang": 1})
        self.assertEqual(len(after["devices"]), 4)
        with open(os.path.join(root, "set_env.sh")) as f:
            self.assertIn("sleep 0.2", f.read())
        for k in ("devices", "memory", "layout", "installed"):
            self.assertEqual(after[k], before[k])
        r = self._setup("--root", root, "--update", "--clear-faults")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["faults"], {})
        self.assertEqual(self._setup("--root", root, "--update", "--fault", "nope").returncode, 2)
        self.assertEqual(self._setup("--root", os.path.join(self.tmp, "none"), "--update").returncode, 2)


if __name__ == "__main__":
    unittest.main()
