"""Completion signals: torch_npu's finalise after /stop_profile (at once,
slow, never) and msprof's flush after the application exits (end_info
markers, the final log line, CSVs before exit; a flush that hangs or dies).
Checks never bound how fast the simulator is: "not yet" is only asserted
while the configured delay has provably not passed."""
import glob
import json
import os
import signal
import subprocess
import time
import unittest

from .sim_harness import SimTestCase, complete, http, wait_for
from npusim import msprof_raw

PROFILE_DIR = "vllm_profile"


def ascend_pts(tmp):
    return sorted(glob.glob(os.path.join(tmp, PROFILE_DIR, "*_ascend_pt")))


def rank_of(pt):
    with open(os.path.join(pt, "profiler_metadata.json")) as f:
        json.load(f)  # the skeleton is complete JSON from the start
    infos = glob.glob(os.path.join(pt, "profiler_info_*.json"))
    return int(infos[0].rsplit("_", 1)[1].split(".")[0]) if infos else None


def finalised(pt):
    return bool(glob.glob(os.path.join(pt, "profiler_info_*.json")))


def slices(pt):
    return sorted(glob.glob(os.path.join(pt, "PROF_*", "device_*", "data", "sim_tasks.json.slice_*")),
                  key=lambda f: int(f.rsplit("_", 1)[1]))


class TorchFinalise(SimTestCase):
    def _window(self, tp=2, requests=3):
        p, port = self.serve(tp=tp, profile=True)
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        for _ in range(requests):
            self.assertEqual(complete(port, max_tokens=4), 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        return p, port, time.time()

    def _session(self):
        sessions = self.truth()["profile_sessions"]
        self.assertEqual(len(sessions), 1)
        return {r["rank"]: r for r in sessions[0]["ranks"]}, sessions[0]

    def test_default_finalises_before_stop_profile_answers(self):
        self.make_target()
        p, _port, _t = self._window()
        pts = ascend_pts(self.tmp)
        self.assertEqual(len(pts), 2)
        for pt in pts:
            self.assertTrue(finalised(pt), pt)
            self.assertTrue(all(msprof_raw.is_finished(prof) for prof in glob.glob(os.path.join(pt, "PROF_*"))))
            self.assertEqual(len(slices(pt)), 1)
        ranks, session = self._session()
        self.assertEqual(sorted(ranks), [0, 1])
        for r in ranks.values():
            self.assertEqual(r["finalise_delay_s"], 0.0)
            self.assertIsNotNone(r["finalised_at"])
            self.assertGreaterEqual(r["finalised_at"], session["stop_at"])
            self.assertIn(r["dir"], pts)
        self.assertEqual(self.stop(p), 0)
        fin = [e for e in self.timeline() if e["what"] == "torch_finalise"]
        self.assertEqual(sorted(e["rank"] for e in fin), [0, 1])
        self.assertEqual(len([e for e in self.timeline() if e["what"] == "profile_stop"]), 1)

    def test_slow_rank_grows_then_finalises_last(self):
        delay = 2.0
        self.make_target(finalise_delay=[0.0, delay])
        p, _port, t_answer = self._window()
        pts = ascend_pts(self.tmp)
        self.assertEqual(len(pts), 2)  # both directories exist when /stop_profile answers
        ranks, session = self._session()
        slow = ranks[1]["dir"]
        self.assertTrue(finalised(ranks[0]["dir"]))
        # Look first, then read the clock: a look taken before the delay passed
        # must not see the finalise (reading the clock first races the look).
        seen = finalised(slow)
        if time.time() - session["stop_at"] < delay:
            self.assertFalse(seen, "rank 1 finalised before its delay passed")
        wait_for(lambda: finalised(slow), timeout=30, what="rank 1's profiler_info")
        self.assertEqual(rank_of(slow), 1)
        # the data landed in slices over the delay, profiler_info last; nothing changes after it
        sl = slices(slow)
        self.assertGreaterEqual(len(sl), 2)
        mtimes = [os.stat(f).st_mtime_ns for f in sl]
        self.assertEqual(mtimes, sorted(mtimes))
        info = glob.glob(os.path.join(slow, "profiler_info_*.json"))[0]
        self.assertGreaterEqual(os.stat(info).st_mtime_ns, mtimes[-1])
        for prof in glob.glob(os.path.join(slow, "PROF_*")):
            self.assertTrue(msprof_raw.is_finished(prof))
        # The simulator records the finalise in its truth after the files
        # landed (profiler_info first): wait for that record too.
        wait_for(lambda: self._session()[0][1]["finalised_at"] is not None, timeout=30,
                 what="rank 1's finalise in the simulator's truth")
        ranks, session = self._session()
        self.assertGreaterEqual(ranks[1]["finalised_at"] - session["stop_at"], delay)
        self.assertEqual(ranks[1]["finalise_delay_s"], delay)
        sizes = sorted((os.path.join(d, f), os.path.getsize(os.path.join(d, f)))
                       for d, _s, fs in os.walk(slow) for f in fs)
        self.assertEqual(self.stop(p), 0)
        after = sorted((os.path.join(d, f), os.path.getsize(os.path.join(d, f)))
                       for d, _s, fs in os.walk(slow) for f in fs)
        self.assertEqual(sizes, after)
        del t_answer

    def test_hung_rank_never_finalises(self):
        self.make_target(faults=["finalise_hang=1"], finalise_delay=0.2)
        p, _port, _t = self._window()
        ranks, _session = self._session()
        wait_for(lambda: finalised(ranks[0]["dir"]), timeout=30, what="rank 0's profiler_info")
        hung = ranks[1]["dir"]
        wait_for(lambda: slices(hung), timeout=30, what="rank 1's first data")
        self.assertEqual(self.stop(p), 0)
        self.assertFalse(finalised(hung))
        self.assertFalse(any(msprof_raw.is_finished(prof) for prof in glob.glob(os.path.join(hung, "PROF_*"))))
        ranks, _session = self._session()
        self.assertTrue(ranks[1]["hang"])
        self.assertIsNone(ranks[1]["finalised_at"])
        self.assertTrue(ranks[1]["abandoned"])
        self.assertFalse(ranks[0]["abandoned"])
        # analyse() of the unfinished directory sees only the slices that landed
        r = self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s')\"" % hung)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(hung, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")) as f:
            rows = len(f.read().splitlines()) - 1
        self.assertLess(rows, sum(k["count"] for k in ranks[1]["kernels"]))
        self.assertGreater(rows, 0)


class MsprofFlush(SimTestCase):
    def _profs_with_devices(self, out_dir):
        return [p for p in sorted(glob.glob(os.path.join(out_dir, "PROF_*"))) if msprof_raw.prof_devices(p)]

    def _stop_and_wait_service(self, p):
        """SIGINT to msprof (reaches the service); -> when the service had exited (truth says stopped)."""
        p.send_signal(signal.SIGINT)
        wait_for(lambda: self.truth().get("status") == "stopped", timeout=30, what="the service to stop")
        return time.time()

    def test_flush_then_end_info_then_csvs_then_exit(self):
        flush = 1.5
        self.make_target(msprof_flush_delay=flush)
        p, port, out_dir = self.serve_under_msprof(tp=2)
        self.assertEqual(complete(port), 200)
        self._stop_and_wait_service(p)
        stopped_at = self.truth()["stopped_at"]
        profs = self._profs_with_devices(out_dir)
        self.assertEqual(len(profs), 2)
        # Look first, then read the clock (see test_slow_rank_grows_then_finalises_last).
        exited = p.poll()
        finished = any(msprof_raw.is_finished(x) for x in profs)
        if time.time() - stopped_at < flush:
            self.assertIsNone(exited, "msprof exited before its flush delay passed")
            self.assertFalse(finished, "end_info before the flush ended")
        self.assertEqual(p.wait(30), 0)
        out, _ = self.logs(p)
        for prof in profs:
            self.assertTrue(msprof_raw.is_finished(prof))
            for d in msprof_raw.prof_devices(prof):
                with open(os.path.join(prof, "device_%d" % d, "end_info.%d" % d)) as f:
                    self.assertGreater(int(json.load(f)["collectionTimeEnd"]), 0)
            self.assertTrue(os.path.isfile(os.path.join(prof, "host", "end_info")))
            csvs = glob.glob(os.path.join(prof, "mindstudio_profiler_output", "npu_mem_*.csv"))
            self.assertEqual(len(csvs), 1)
            self.assertGreaterEqual(os.stat(csvs[0]).st_mtime_ns,
                                    os.stat(os.path.join(prof, "host", "end_info.done")).st_mtime_ns)
            self.assertIn("[INFO] Process profiling data complete. Data is saved in %s\n" % prof, out)
        self.assertLess(out.index("[INFO] Profiling finished."), out.index("Process profiling data complete"))
        flushes = [e for e in self.timeline() if e["what"] == "msprof_flush"]
        self.assertEqual(len(flushes), 1)
        self.assertGreaterEqual(flushes[0]["dur_s"], flush)
        self.assertGreaterEqual(flushes[0]["start"], stopped_at - 0.001)
        self.assertEqual(len([e for e in self.timeline() if e["what"] == "msprof_auto_export"]), 1)

    def test_flush_hang_never_completes(self):
        self.make_target(faults=["msprof_flush_hang"])
        p, port, out_dir = self.serve_under_msprof()
        self.assertEqual(complete(port), 200)
        self._stop_and_wait_service(p)
        p.send_signal(signal.SIGTERM)  # a hung msprof does not answer SIGINT/SIGTERM any more
        with self.assertRaises(subprocess.TimeoutExpired):
            p.wait(1.0)
        profs = self._profs_with_devices(out_dir)
        self.assertEqual(len(profs), 1)
        self.assertFalse(msprof_raw.is_finished(profs[0]))
        self.assertEqual(glob.glob(os.path.join(profs[0], "mindstudio_profiler_output", "*.csv")), [])
        self.assertTrue(os.path.isfile(os.path.join(profs[0], "device_0", "data", "npu_mem.data")))
        self.assertNotIn("Process profiling data complete", self.logs(p)[0])
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
        # a hung flush logs no piece of its own (only msprof's process start, before the application)
        self.assertEqual([e["what"] for e in self.timeline() if e["what"].startswith("msprof_")],
                         ["msprof_process_start"])

    def test_flush_crash_dies_without_end_info(self):
        self.make_target(faults=["msprof_flush_crash"])
        p, port, out_dir = self.serve_under_msprof()
        self.assertEqual(complete(port), 200)
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), -signal.SIGKILL)
        profs = self._profs_with_devices(out_dir)
        self.assertEqual(len(profs), 1)
        self.assertFalse(msprof_raw.is_finished(profs[0]))
        self.assertEqual(glob.glob(os.path.join(profs[0], "mindstudio_profiler_output", "*.csv")), [])
        self.assertNotIn("Profiling finished", self.logs(p)[0])
        # an explicit export still works on the raw data that landed
        r = self.run_tool(["msprof", "--export=on", "--output=%s" % out_dir])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(glob.glob(os.path.join(profs[0], "mindstudio_profiler_output", "npu_mem_*.csv"))), 1)


if __name__ == "__main__":
    unittest.main()
