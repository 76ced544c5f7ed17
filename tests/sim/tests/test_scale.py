"""The simulator at real scale: a rank of 400,000 kernel rows generates and
analyses in a few seconds; the host's cores, memory and disk answer
through nproc, the meminfo file set_env.sh names and df; analyse(root,
max_process_number=N) runs N directories at once, records each one's start
and end, and a directory whose memory does not fit is killed out of memory."""
import csv
import glob
import json
import os
import time
import unittest


from .sim_harness import SimTestCase, complete, http
from npusim import target_setup


def overlap(pieces):
    """The most pieces (start, end) running at one instant."""
    edges = sorted([(s, 1) for s, _e in pieces] + [(e, -1) for _s, e in pieces], key=lambda x: (x[0], x[1]))
    most = cur = 0
    for _t, d in edges:
        cur += d
        most = max(most, cur)
    return most


class ScaleCase(SimTestCase):
    def profile(self, tp, requests=1):
        p, port = self.serve(tp=tp, profile=True)
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        for _ in range(requests):
            self.assertEqual(complete(port, max_tokens=3, prompt="w " * 20), 200)
        t0 = time.monotonic()
        self.assertEqual(http("POST", port, "/stop_profile", timeout=120)[0], 200)
        took = time.monotonic() - t0
        self.assertEqual(self.stop(p), 0)
        return os.path.join(self.tmp, "vllm_profile"), took

    def analyse(self, root, n=None, timeout=120):
        arg = "" if n is None else ", max_process_number=%d" % n
        return self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s'%s)\"" % (root, arg),
                       timeout=timeout)

    def runs(self):
        return [(e["start"], e["end"], e) for e in self.timeline() if e.get("what") == "analyse"]


class RealScale(ScaleCase):

    def test_a_400000_row_rank_generates_and_analyses_in_seconds(self):
        self.make_target(sets=["scale.rows_per_rank=400000", "scale.trace_view_mb=8"])
        root, took = self.profile(tp=1)
        self.assertLess(took, 8.0, "writing a real-scale rank took %.1f s" % took)
        t0 = time.monotonic()
        r = self.analyse(root)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - t0, 30.0)  # ~7 s on a loaded 2-core machine
        rank = self.truth()["profile_sessions"][0]["ranks"][0]
        out = os.path.join(rank["dir"], "ASCEND_PROFILER_OUTPUT")
        got, rows = {}, 0
        with open(os.path.join(out, "kernel_details.csv"), newline="") as f:
            reader = csv.reader(f)
            name = next(reader).index("Name")
            for row in reader:
                rows += 1
                got[row[name]] = got.get(row[name], 0) + 1
        self.assertEqual(rows, 400000)
        self.assertEqual(got, {k["name"]: k["count"] for k in rank["kernels"]})
        self.assertGreater(os.path.getsize(os.path.join(out, "trace_view.json")), 8 << 20)
        with open(os.path.join(out, "trace_view.json")) as f:
            self.assertGreater(len(json.load(f)), 10000)

    def test_rows_vary_per_rank(self):
        self.make_target(sets=["scale.rows_per_rank=20000", "scale.rows_variation=0.5"])
        self.profile(tp=2)
        ranks = self.truth()["profile_sessions"][0]["ranks"]
        totals = [sum(k["count"] for k in r["kernels"]) for r in ranks]
        self.assertEqual(totals, [20000, 30000])


class HostView(SimTestCase):
    def test_cores_memory_and_disk_answer_as_a_real_host(self):
        self.make_target(sets=["host.cores=4", "host.mem_available_mb=2048", "host.disk_free_mb=100"])
        r = self.sh('nproc; awk \'$1 == "MemAvailable:" { print $2 }\' "${NPUPROF_MEMINFO:-/proc/meminfo}"; '
                    'df -Pk -- / | awk \'NR == 2 { print $4 }\'')
        self.assertEqual(r.stdout.split(), ["4", str(2048 * 1024), str(100 * 1024)], r.stderr)

    def test_unset_keys_leave_the_real_host(self):
        self.make_target()
        r = self.sh('echo "${NPUPROF_MEMINFO:-unset}"; command -v nproc; command -v df')
        lines = r.stdout.split()
        self.assertEqual(lines[0], "unset")
        self.assertFalse(lines[1].startswith(self.target["bin"]))
        self.assertFalse(lines[2].startswith(self.target["bin"]))


class ParallelAnalyse(ScaleCase):
    def test_max_process_number_runs_that_many_at_once(self):
        self.make_target(sets=["delays.analyse=0.6"])
        root, _ = self.profile(tp=4)
        r = self.analyse(root, n=2)
        self.assertEqual(r.returncode, 0, r.stderr)
        runs = self.runs()
        self.assertEqual(len(runs), 4)
        self.assertEqual(overlap([(s, e) for s, e, _ in runs]), 2)

    def test_memory_that_does_not_fit_is_an_out_of_memory_kill(self):
        self.make_target(sets=["delays.analyse=1.0", "analyse.peak_mb_per_mb=20", "scale.rows_per_rank=20000"])
        root, _ = self.profile(tp=2)
        raw = [sum(os.path.getsize(f) for f in glob.glob(os.path.join(d, "**"), recursive=True) if os.path.isfile(f))
               for d in sorted(glob.glob(os.path.join(root, "*_ascend_pt")))]
        # memory for one of the two at a time
        target_setup.update(self.target["root"], sets=["host.mem_available_mb=%f" % (max(raw) * 20 * 1.5 / (1 << 20))])
        r = self.analyse(root, n=2)
        self.assertIn(r.returncode, (137, -9), r.stdout + r.stderr)  # SIGKILL: bash may exec python itself
        self.assertIn("out of memory", r.stdout)
        self.assertTrue(any(e.get("oom") for _s, _e, e in self.runs()))
        # one at a time fits
        r = self.analyse(root, n=1)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        ok = [e for _s, _e, e in self.runs() if not e.get("oom")]
        self.assertGreaterEqual(len(ok), 2)
        self.assertGreater(ok[-1]["peak_mb"], 0)


if __name__ == "__main__":
    unittest.main()
