"""HBM over the whole run: the msprof npu_mem series walks through the
phases in truth (launch to stopped) at the levels truth gives per device;
activation retained (npu-smi keeps it after the request) vs released (only
the series sees the peak, inside the request's window); the sampling grid."""
import bisect
import csv
import glob
import os
import signal
import threading
import unittest

from .sim_harness import SimTestCase, complete, parse_npu_smi, wait_for
from npusim import msprof_series
from npusim.service_phases import PhaseLog

PHASES = ["launch", "starting", "loaded", "profile_run", "kv_allocated", "graph_captured", "ready", "inference",
          "idle", "stopping", "stopped"]


def series(out_dir, device, event="Device", column="hbm(KB)"):
    """[(t_us, KB)] of one device's npu_mem rows from the newest export."""
    files = sorted(glob.glob(os.path.join(out_dir, "PROF_*", "mindstudio_profiler_output", "npu_mem_*.csv")))
    rows = []
    for path in files:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if int(r["Device_id"]) == device and r["event"] == event:
                    rows.append((float(r["timestamp(us)"].strip()), int(r[column])))
    return sorted(set(rows))


def module_rows(out_dir, device):
    files = glob.glob(os.path.join(out_dir, "PROF_*", "mindstudio_profiler_output", "npu_module_mem_*.csv"))
    out = []
    for path in files:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if int(r["Device_id"]) == device:
                    out.append((float(r["Timestamp(us)"].strip()), r["Component"], int(r["Total Reserved(KB)"])))
    return out


def phase_at(phases, t_us):
    """The truth phase holding sample time t_us, or None within 2 µs of a boundary."""
    starts = [p["start"] * 1e6 for p in phases]
    i = bisect.bisect_right(starts, t_us) - 1
    if i < 0:
        return None
    nearest = min(abs(t_us - starts[i]), abs(t_us - starts[i + 1]) if i + 1 < len(starts) else 1e9)
    return None if nearest < 2 else phases[i]


class WholeRunRetained(SimTestCase):
    def test_series_follows_truth_phases_and_levels(self):
        self.make_target()
        p, port, out_dir = self.serve_under_msprof(tp=2, devices="2,3")
        self.assertEqual(complete(port, max_tokens=128), 200)
        truth = self.truth()
        self.assertEqual(truth["activation_mode"], "retained")
        devs, _ = parse_npu_smi(self.npu_smi())
        for d in ("2", "3"):
            smi = truth["per_device"][d]["npu_smi"]
            self.assertEqual(smi["after_inference_mb"], smi["inference_peak_mb"])
            self.assertEqual(devs[int(d)]["used"], smi["after_inference_mb"])  # the allocator kept it
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), 0)
        truth = self.truth()
        phases = truth["phases"]
        self.assertEqual([x["phase"] for x in phases], PHASES)
        for a, b in zip(phases, phases[1:]):
            self.assertEqual(a["end"], b["start"])
        for d in (2, 3):
            levels = truth["per_device"][str(d)]["hbm_levels_mb"]
            app_levels = truth["per_device"][str(d)]["app_levels_mb"]
            self.assertEqual(levels["ready"], truth["per_device"][str(d)]["npu_smi"]["after_ready_mb"])
            self.assertLess(levels["profile"], levels["kv"])
            dev_rows, app_rows = series(out_dir, d), dict(series(out_dir, d, "APP"))
            seen = set()
            for t, kb in dev_rows:
                ph = phase_at(phases, t)
                if ph is None:
                    continue
                seen.add(ph["phase"])
                self.assertEqual(kb, levels[ph["level"]] * 1024, (ph, t))
                self.assertEqual(app_rows[t], int(round(app_levels[ph["level"]] * 1024)), (ph, t))
            # short phases may fall between samples; the long ones are always seen
            for must in ("starting", "inference", "idle", "stopped"):
                self.assertIn(must, seen)
            self.assertEqual(dev_rows[0][1], levels["base"] * 1024)
            self.assertEqual(dev_rows[-1][1], levels["base"] * 1024)
            self.assertEqual(max(kb for _t, kb in dev_rows), levels["inferred"] * 1024)
            self.assertEqual(len(dev_rows), truth["msprof_series"]["samples"])
            mods = module_rows(out_dir, d)
            first = min(t for t, _c, _k in mods)
            self.assertEqual(sorted((c, k) for t, c, k in mods if t == first),
                             sorted({"SLOG": 6144, "RUNTIME": 128307 // 2}.items()))
        # memory-profile's request (128 tokens at the default 1 ms per token) spans several 50 Hz samples
        self.assertGreaterEqual(truth["msprof_series"]["inference_windows"][0]["samples"], 5)


class ActivationReleased(SimTestCase):
    def test_npu_smi_misses_the_peak_the_series_sees(self):
        self.make_target(activation="released", sets=["delays.token=0.005"])
        p, port, out_dir = self.serve_under_msprof(devices="1")
        truth = self.truth()
        smi = truth["per_device"]["1"]["npu_smi"]
        self.assertEqual(truth["activation_mode"], "released")
        self.assertEqual(smi["after_inference_mb"], smi["after_ready_mb"])
        self.assertEqual(smi["inference_peak_mb"], smi["after_ready_mb"] + 180)
        # a 4 s request: npu-smi shows the activation only while it runs
        done = []
        th = threading.Thread(target=lambda: done.append(complete(port, max_tokens=800)))
        th.start()
        seen = wait_for(lambda: [u for u in [parse_npu_smi(self.npu_smi())[0][1]["used"]]
                                 if u == smi["inference_peak_mb"] or done], timeout=30, what="the peak on npu-smi")
        th.join(30)
        self.assertEqual(done, [200])
        self.assertEqual(seen, [smi["inference_peak_mb"]], "npu-smi never showed the activation in flight")
        self.assertEqual(parse_npu_smi(self.npu_smi())[0][1]["used"], smi["after_ready_mb"])
        self.assertEqual(complete(port, max_tokens=128), 200)  # a short one, as memory-profile sends
        self.assertEqual(parse_npu_smi(self.npu_smi())[0][1]["used"], smi["after_ready_mb"])
        p.send_signal(signal.SIGINT)
        self.assertEqual(p.wait(30), 0)
        truth = self.truth()
        c = truth["per_device"]["1"]
        self.assertEqual(c["components_mb"]["activation_peak"], 180.0)
        self.assertAlmostEqual(sum(c["components_mb"].values()), c["npu_smi"]["inference_peak_mb"], places=6)
        reqs = truth["requests_log"]
        self.assertEqual([r["completion_tokens"] for r in reqs], [800, 128])
        self.assertEqual(truth["first_request_at"], reqs[0]["start"])
        self.assertEqual(truth["first_request_end_at"], reqs[0]["end"])
        wins = truth["msprof_series"]["inference_windows"]
        # The two records round the same instants separately (to the microsecond), so allow one unit of it.
        self.assertEqual(len(wins), len(reqs))
        for w, r in zip(wins, reqs):
            self.assertAlmostEqual(w["start"], r["start"], delta=2e-6)
            self.assertAlmostEqual(w["end"], r["end"], delta=2e-6)
        self.assertGreaterEqual(wins[1]["samples"], 5)
        rows = series(out_dir, 1)
        app = dict(series(out_dir, 1, "APP"))
        # The after-ready level holds from graph capture on; a request sent
        # less than one sample period after it (a loaded machine) has no
        # sample between the two, and the one before it shows the KV level.
        ready_us = next(ph["start"] for ph in truth["phases"] if ph["phase"] == "graph_captured") * 1e6
        for i, w in enumerate(wins):
            inside = [kb for t, kb in rows if w["start"] * 1e6 + 2 <= t < w["end"] * 1e6 - 2]
            before = [kb for t, kb in rows if ready_us + 2 <= t < w["start"] * 1e6 - 2]
            after = [kb for t, kb in rows if t >= w["end"] * 1e6 + 2][0]
            self.assertGreaterEqual(len(inside), w["samples"] - 1)
            self.assertEqual(max(inside), smi["inference_peak_mb"] * 1024)
            if i > 0:
                self.assertTrue(before, "no sample between the two requests")
            if before:
                self.assertEqual(before[-1], smi["after_ready_mb"] * 1024)
            self.assertEqual(after, smi["after_ready_mb"] * 1024)
            self.assertEqual(max(app[t] for t, _kb in rows if w["start"] * 1e6 + 2 <= t < w["end"] * 1e6 - 2),
                             c["msprof_app_peak_kb"])


class Phases(unittest.TestCase):
    def test_requests_finishing_during_shutdown_change_no_phase(self):
        log = PhaseLog(release=True, t0=1.0)
        log.mark("ready", "ready", 2.0)
        self.assertTrue(log.request_started(3.0))
        self.assertFalse(log.request_started(3.5))   # a second one in flight: same window
        self.assertFalse(log.request_ended(4.0))
        self.assertTrue(log.request_ended(5.0))
        log.request_started(6.0)
        log.mark("stopping", None, 7.0)
        log.request_ended(7.5)
        log.mark("stopped", "base", 8.0)
        self.assertEqual([(p["phase"], p["level"], p["start"]) for p in log.truth()],
                         [("launch", "base", 1.0), ("ready", "ready", 2.0), ("inference", "inferred", 3.0),
                          ("idle", "ready", 5.0), ("inference", "inferred", 6.0), ("stopping", "inferred", 7.0),
                          ("stopped", "base", 8.0)])
        self.assertEqual(log.inference_windows(), [(3.0, 5.0), (6.0, 7.0)])

    def test_retained_activation_keeps_the_level_when_idle(self):
        log = PhaseLog(release=False, t0=1.0)
        log.mark("ready", "ready", 2.0)
        log.request_started(3.0)
        self.assertFalse(log.request_ended(4.0))
        self.assertEqual(log.truth()[-1]["level"], "inferred")


class SamplingGrid(unittest.TestCase):
    def test_one_grid_over_contiguous_segments(self):
        segs = [[0.0, 30000.0, "a"], [30000.0, 31000.0, "b"], [31000.0, 100000.0, "c"]]
        got = [(t, s[2]) for t, s in msprof_series.sample(segs, 50)]
        self.assertEqual(got, [(0.0, "a"), (20000.0, "a"), (40000.0, "c"), (60000.0, "c"), (80000.0, "c")])

    def test_long_runs_are_sampled_more_coarsely(self):
        t = msprof_series.grid(0.0, 1e6 * 3600, 50)
        self.assertLessEqual(len(t), msprof_series.MAX_SAMPLES)
        self.assertAlmostEqual(t[1] - t[0], 1e6 * 3600 / msprof_series.MAX_SAMPLES)

    def test_truth_counts_samples_per_window(self):
        entries = [[0.0, "ready", "ready"], [50000.0, "inference", "inferred"], [110000.0, "idle", "ready"],
                   [200000.0, "end", "ready"]]
        tr = msprof_series.truth(entries, 50, [(0.05, 0.11)])
        self.assertEqual(tr["samples"], 10)
        self.assertEqual(tr["inference_windows"][0]["samples"], 3)  # 60, 80, 100 ms


if __name__ == "__main__":
    unittest.main()
