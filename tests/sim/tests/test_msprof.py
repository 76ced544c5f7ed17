"""msprof: help (and no --version), app mode wrapping a tp=2 service with
signal pass-through, per-process PROF_* dirs, export CSVs equal to truth."""
import csv
import glob
import os
import re
import signal
import subprocess
import time
import unittest

from .sim_harness import DATA, SimTestCase, free_port, http, parse_npu_smi, small_model
from npusim import msprof_raw


def header(name):
    with open(os.path.join(DATA, name)) as f:
        return f.read().strip()


class MsprofCli(SimTestCase):
    def test_help_and_no_version(self):
        self.make_target()
        r = self.run_tool(["msprof", "--help"])
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("\nUsage:\n      msprof [--options]\n"))
        self.assertRegex(r.stdout, r"\n      --sys-hardware-mem-freq +<Optional> ")
        self.assertRegex(r.stdout, r"\n      --output {26}<Optional> Specify the directory")
        r = self.run_tool(["msprof", "--version"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unrecognized option '--version'", r.stderr)

    def test_msprof_missing(self):
        self.make_target(msprof_missing=True)
        self.assertNotEqual(self.sh("command -v msprof").returncode, 0)
        self.assertEqual(self.sh("command -v npu-smi").returncode, 0)

    def test_app_without_ai_work_reports_no_data(self):
        self.make_target()
        r = self.run_tool(["msprof", "--output=%s" % os.path.join(self.tmp, "o"), "--sys-hardware-mem=on",
                           "--application=bash -c true"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("[ERROR] Failed to find profiling data", r.stdout)

    def test_export_without_prof_dirs_fails(self):
        self.make_target()
        os.makedirs(os.path.join(self.tmp, "empty"))
        r = self.run_tool(["msprof", "--export=on", "--output=%s" % os.path.join(self.tmp, "empty")])
        self.assertNotEqual(r.returncode, 0)


class MsprofWrapAndExport(SimTestCase):
    def test_wrap_stop_export_matches_truth(self):
        self.make_target(export_delay=0.6)
        port = free_port()
        serve = os.path.join(self.tmp, "_serve.sh")
        with open(serve, "w") as f:
            f.write("exec vllm serve %s --host 0.0.0.0 --port %d --served-model-name m --tensor-parallel-size 2 "
                    "--gpu-memory-utilization 0.85 --max-model-len 2048\n" % (small_model(), port))
        out_dir = os.path.join(self.tmp, "msprof_data")
        p = self.start(["msprof", "--output=%s" % out_dir, "--sys-hardware-mem=on", "--sys-hardware-mem-freq=50",
                        "--task-time=off", "--ai-core=off", "--ascendcl=off", "--application=bash %s" % serve],
                       devices="6,7", name="msprof")
        self.wait_ready(p, port)
        truth = self.truth()
        self.assertEqual(truth["msprof_output"], out_dir)
        self.assertEqual(http("POST", port, "/v1/completions", {"model": "m", "prompt": "hi", "max_tokens": 8})[0], 200)
        devs, _ = parse_npu_smi(self.npu_smi())
        self.assertEqual(devs[6]["used"], truth["per_device"]["6"]["npu_smi"]["after_inference_mb"])
        time.sleep(0.3)
        self.assertEqual(self.stop(p, signal.SIGINT), 0)  # SIGINT to msprof reaches the service
        stdout, _ = self.logs(p)
        self.assertIn("[INFO] Start profiling....", stdout)
        self.assertIn("[INFO] Profiling finished.", stdout)
        self.assertRegex(stdout, r"\[INFO\] Process profiling data complete\. Data is saved in .*/PROF_\d{6}_\d{17}_")
        self.assertIn("Application shutdown complete.", stdout)
        profs = sorted(glob.glob(os.path.join(out_dir, "PROF_*")))
        self.assertEqual(len(profs), 3)  # API server (host only) + one per rank
        by_dev = {}
        for prof in profs:
            self.assertRegex(os.path.basename(prof), r"^PROF_\d{6}_\d{17}_\d{8}[A-R]{8}$")
            for d in msprof_raw.prof_devices(prof):
                by_dev[d] = prof
        self.assertEqual(sorted(by_dev), [6, 7])
        for prof in by_dev.values():
            for f in glob.glob(os.path.join(prof, "mindstudio_profiler_output", "*.csv")):
                os.unlink(f)  # drop msprof's automatic export: check the explicit one

        t0 = time.time()
        r = self.run_tool(["msprof", "--export=on", "--output=%s" % out_dir])
        self.assertGreaterEqual(time.time() - t0, 0.55)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for prof in profs:
            name = os.path.basename(prof)
            self.assertIn("[INFO] Start export data in %s." % name, r.stdout)
            self.assertIn("[INFO] Export all data in %s done." % name, r.stdout)
        for dev, prof in by_dev.items():
            t = truth["per_device"][str(dev)]
            outd = os.path.join(prof, "mindstudio_profiler_output")
            mod = glob.glob(os.path.join(outd, "npu_module_mem_*.csv"))
            mem = glob.glob(os.path.join(outd, "npu_mem_*.csv"))
            self.assertEqual(len(mod), 1)
            self.assertEqual(len(mem), 1)
            self.assertRegex(os.path.basename(mod[0]), r"^npu_module_mem_\d{14}\.csv$")
            with open(mod[0], newline="") as f:
                text = f.read()
            self.assertEqual(text.splitlines()[0], header("npu_module_mem.msprof.header.csv"))
            self.assertIn("\t,", text)  # timestamps carry a trailing TAB
            peak = {}
            for row in csv.DictReader(text.splitlines()):
                self.assertEqual(row["Device"], "NPU:%d" % dev)
                self.assertRegex(row["Timestamp(us)"], r"^\d{16}\.\d{3}\t$")
                peak[row["Component"]] = max(peak.get(row["Component"], 0), int(row["Total Reserved(KB)"]))
            self.assertEqual(peak, t["msprof_components_kb"])
            self.assertAlmostEqual(peak["HCCL"] / 1024, t["components_mb"]["hccl"])
            self.assertAlmostEqual(peak["RUNTIME"] / 1024, t["components_mb"]["runtime"])
            other = sum(v / 1024 for k, v in peak.items() if k not in ("HCCL", "RUNTIME", "SLOG") and v / 1024 > 0.5)
            self.assertAlmostEqual(other, t["components_mb"]["msprof_other"])
            comps = [row.split(",")[1] for row in text.splitlines()[1:]]
            self.assertEqual(comps, sorted(comps, key=["SLOG", "HCCL", "FMK", "RUNTIME", "DRV", "DEVMM"].index))
            with open(mem[0], newline="") as f:
                text = f.read()
            self.assertEqual(text.splitlines()[0], header("npu_mem.msprof.header.csv"))
            app = max(int(r["hbm(KB)"]) for r in csv.DictReader(text.splitlines()) if r["event"] == "APP")
            device = max(int(r["hbm(KB)"]) for r in csv.DictReader(text.splitlines()) if r["event"] == "Device")
            self.assertEqual(app, t["msprof_app_peak_kb"])
            self.assertEqual(device, t["npu_smi"]["after_inference_mb"] * 1024)
            self.assertTrue(re.search(r"^\d+,APP,\d+,\d+,\d+,\d+\.\d{3}\t$", text, re.M))


class ExportHang(SimTestCase):
    def test_export_hang(self):
        self.make_target(faults=["export_hang"])
        out = os.path.join(self.tmp, "data")
        msprof_raw.create_prof(out, 4242, [0])
        env = self.env()
        p = subprocess.Popen(["msprof", "--export=on", "--output=%s" % out], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        with self.assertRaises(subprocess.TimeoutExpired):
            p.wait(1.5)
        self.assertEqual(glob.glob(os.path.join(out, "PROF_*", "mindstudio_profiler_output", "*.csv")), [])


if __name__ == "__main__":
    unittest.main()
