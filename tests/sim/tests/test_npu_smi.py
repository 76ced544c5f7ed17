"""npu-smi: layouts match the real samples byte for byte, split on '|', and
follow the simulated state (baseline, busy devices, missing tool)."""
import os
import re
import unittest

from .sim_harness import DATA, SimTestCase, parse_npu_smi
from npusim.npu_smi_render import render

PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_sample(text):
    kind = "a3" if "Phy-ID" in text else ("310p" if "HBM-Usage" not in text else "910")
    ver, drv = re.search(r"npu-smi (\S+)\s+Version: (\S+)", text).groups()
    rows, in_proc = [], False
    for line in text.splitlines():
        if line.startswith("| NPU") and "Process id" in line:
            in_proc = True
            continue
        if line.startswith("|"):
            rows.append((in_proc, [c.strip() for c in line.strip().strip("|").split("|")]))
    dev = [c for p, c in rows if not p][3:]
    chips, procs = [], []
    for i in range(0, len(dev), 2):
        r1, r2 = dev[i], dev[i + 1]
        npu, name = r1[0].split()
        f = r2[0].split()
        pairs = [list(x) for x in PAIR.findall(r2[2])]
        ch = {"npu_id": npu, "chip": f[0], "phy_id": f[1] if len(f) > 1 else None, "name": name,
              "health": r1[1], "power": r1[2].split()[0], "temp": r1[2].split()[1],
              "hugepages": list(PAIR.findall(r1[2])[0]), "bus_id": r2[1], "aicore": r2[2].split()[0],
              "mem": pairs[0]}
        if len(pairs) > 1:
            ch["hbm"] = pairs[1]
        chips.append(ch)
    for p, c in rows:
        if p and not c[0].startswith("No running"):
            npu, chip = c[0].split()
            procs.append({"npu_id": npu, "chip": chip, "pid": c[1], "name": c[2], "mem_mb": c[3]})
    return kind, ver, drv, chips, procs


class RenderMatchesRealSamples(unittest.TestCase):
    def test_samples_byte_exact(self):
        for name in ("01_910B3_8npu_procs.txt", "02_Ascend910-A3_8npu_procs.txt", "06_910B4_4npu_procs.txt",
                     "09_310P3_4npu_procs.txt", "19_310P3_2npu_procs.txt"):
            with self.subTest(sample=name):
                with open(os.path.join(DATA, name)) as f:
                    text = f.read()
                kind, ver, drv, chips, procs = parse_sample(text)
                self.assertEqual(render(kind, ver, chips, procs, driver_version=drv), text)


class LiveNpuSmi(SimTestCase):
    def test_910b3_idle_baseline_and_columns(self):
        self.make_target(layout="910B3", devices=8, baseline_mb=2862)
        text = self.npu_smi()
        lines = text.splitlines()
        self.assertEqual(len({len(l) for l in lines}), 1, "all lines same width")
        devs, procs = parse_npu_smi(text)
        self.assertEqual(len(devs), 8)
        self.assertEqual([d["used"] for d in devs], [2862] * 8)
        self.assertEqual({d["total"] for d in devs}, {65536})
        self.assertEqual(procs, [])
        self.assertIn("No running processes found in NPU 7", text)
        self.assertIn("HBM-Usage(MB)", text)

    def test_busy_devices(self):
        self.make_target(layout="910B3", devices=8, busy=["3:proc", "5:hbm=8000"])
        devs, procs = parse_npu_smi(self.npu_smi())
        self.assertEqual(devs[3]["used"], 2862 + 30000)
        self.assertEqual(devs[5]["used"], 2862 + 8000)
        self.assertEqual([(p["npu"], p["mem"]) for p in procs], [(3, 30000)])
        self.assertIn("10862/ 65536", self.npu_smi())  # five-digit used value: the pad vanishes

    def test_a3_two_chips_per_npu(self):
        self.make_target(layout="A3", devices=4)
        text = self.npu_smi()
        devs, _ = parse_npu_smi(text)
        self.assertEqual([(d["npu"], d["chip"]) for d in devs], [(0, 0), (0, 1), (1, 0), (1, 1)])
        self.assertIn("Chip  Phy-ID", text)

    def test_310p_has_no_hbm_column(self):
        self.make_target(layout="310P3", devices=4)
        text = self.npu_smi()
        self.assertNotIn("HBM-Usage", text)
        devs, _ = parse_npu_smi(text)
        self.assertEqual([d["npu"] for d in devs], [0, 0, 96, 96])
        self.assertEqual(devs[0]["total"], 44278)
        self.assertEqual(devs[1]["total"], 43693)

    def test_container_npu_ids(self):
        self.make_target(layout="910B4", devices=4, npu_ids=[4, 5, 6, 7])
        devs, _ = parse_npu_smi(self.npu_smi())
        self.assertEqual([d["npu"] for d in devs], [4, 5, 6, 7])
        self.assertEqual(devs[0]["total"], 32768)

    def test_other_subcommands_fail(self):
        self.make_target()
        for argv in (["npu-smi"], ["npu-smi", "info", "-t", "usages"], ["npu-smi", "set"]):
            r = self.run_tool(argv)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("Usage: npu-smi", r.stdout)

    def test_npu_smi_missing(self):
        self.make_target(npu_smi_missing=True)
        r = self.sh("command -v npu-smi")
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(self.sh("command -v vllm").returncode, 0)


if __name__ == "__main__":
    unittest.main()
