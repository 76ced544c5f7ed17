"""kernel_details.csv: kernels, counts and durations follow the workload and
the model; what analyse() writes equals truth's per-rank kernel summary; a
kernel made slower by config moves by exactly its factor."""
import csv
import glob
import os
import unittest

from .sim_harness import SimTestCase, complete, http
from npusim import kernel_model

SMALL = {"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
         "head_dim": 64, "intermediate_size": 2816, "vocab_size": 32000}
FIA = "FusedInferAttentionScore"


def by_type(tasks):
    out = {}
    for t in tasks:
        e = out.setdefault(t["type"], [0, 0.0])
        e[0] += 1
        e[1] += t["dur_us"]
    return out


def requests(n, prompt, tokens):
    return [{"t_start": 1000.0 + i, "prompt_tokens": prompt, "completion_tokens": tokens} for i in range(n)]


class KernelModel(unittest.TestCase):
    def test_counts_follow_requests_tokens_layers_and_tp(self):
        t = by_type(kernel_model.tasks(requests(3, 40, 5), SMALL, 2, 0, {}))
        steps, layers = 3 * 5, 4
        self.assertEqual(t["MatMulV3"][0], steps * layers * 2)            # qkv + gate_up
        self.assertEqual(t["MatMulV2"][0], steps * (layers * 2 + 1))      # o_proj + down, lm_head
        self.assertEqual(t["FlashAttentionScore"][0], 3 * layers)         # prefill
        self.assertEqual(t[FIA][0], 3 * 4 * layers)                       # decode
        self.assertEqual(t["hcom_allReduce_"][0], steps * layers * 2)
        self.assertNotIn("hcom_allReduce_", by_type(kernel_model.tasks(requests(3, 40, 5), SMALL, 1, 0, {})))
        capped = by_type(kernel_model.tasks(requests(1, 40, 500), SMALL, 1, 0, {}))
        self.assertEqual(capped["GatherV2"][0], kernel_model.DEFAULTS["max_steps_per_request"])
        more = by_type(kernel_model.tasks(requests(1, 40, 500), SMALL, 1, 0, {"kernels": {"max_steps_per_request": 40,
                                                                                         "max_layers": 2}}))
        self.assertEqual(more["GatherV2"][0], 40)
        self.assertEqual(more["MatMulV3"][0], 40 * 2 * 2)

    def test_durations_follow_shapes(self):
        short = by_type(kernel_model.tasks(requests(1, 40, 2), SMALL, 1, 0, {}))
        long_ = by_type(kernel_model.tasks(requests(1, 4000, 2), SMALL, 1, 0, {}))
        self.assertGreater(long_["FlashAttentionScore"][1], 20 * short["FlashAttentionScore"][1])
        self.assertGreater(long_["MatMulV3"][1], 5 * short["MatMulV3"][1])
        tp1 = by_type(kernel_model.tasks(requests(2, 2000, 8), SMALL, 1, 0, {}))
        tp2 = by_type(kernel_model.tasks(requests(2, 2000, 8), SMALL, 2, 0, {}))
        self.assertLess(tp2["MatMulV3"][1], tp1["MatMulV3"][1])
        top = kernel_model.summary(kernel_model.tasks(requests(4, 2000, 16), SMALL, 2, 0, {}))
        self.assertTrue(top[0]["type"].startswith("MatMul"), top[0])
        for e in top:
            self.assertAlmostEqual(e["mean_us"], e["total_us"] / e["count"], places=2)

    def test_moe_models_run_grouped_matmuls(self):
        moe = dict(SMALL, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=256)
        t = by_type(kernel_model.tasks(requests(1, 40, 3), moe, 1, 0, {}))
        self.assertEqual(t["GroupedMatmul"][0], 3 * 4 * 2)
        self.assertEqual(t["MoeGatingTopKSoftmax"][0], 3 * 4)
        self.assertEqual(t["MatMulV3"][0], 3 * 4)  # qkv only: the experts replace the dense FFN

    def test_slow_factor_moves_only_the_named_kernel(self):
        reqs = requests(3, 300, 6)
        base = kernel_model.summary(kernel_model.tasks(reqs, SMALL, 2, 0, {}))
        slow = kernel_model.summary(kernel_model.tasks(reqs, SMALL, 2, 0, {"kernels": {"slow": {FIA: 3}}}))
        a, b = {e["name"]: e for e in base}, {e["name"]: e for e in slow}
        self.assertEqual(set(a), set(b))
        for name in a:
            if a[name]["type"] == FIA:
                self.assertAlmostEqual(b[name]["total_us"] / a[name]["total_us"], 3.0, places=3)
            else:
                self.assertEqual(a[name]["total_us"], b[name]["total_us"], name)
                self.assertEqual(a[name]["count"], b[name]["count"])


class KernelDetailsEndToEnd(SimTestCase):
    def test_csv_equals_truth_and_slow_kernel_is_recorded(self):
        self.make_target(sets=['kernels.slow={"%s": 2.5}' % FIA])
        p, port = self.serve(tp=2, profile=True)
        self.assertEqual(http("POST", port, "/start_profile")[0], 200)
        for _ in range(3):
            self.assertEqual(complete(port, max_tokens=5, prompt="w " * 40), 200)
        self.assertEqual(http("POST", port, "/stop_profile")[0], 200)
        self.assertEqual(self.stop(p), 0)
        root = os.path.join(self.tmp, "vllm_profile")
        r = self.sh("python3 -c \"from torch_npu.profiler.profiler import analyse; analyse('%s')\"" % root)
        self.assertEqual(r.returncode, 0, r.stderr)
        truth = self.truth()
        session = truth["profile_sessions"][0]
        self.assertEqual(session["kernel_slow"], {FIA: 2.5})
        self.assertEqual(session["requests"], 3)
        for rank in session["ranks"]:
            with open(os.path.join(rank["dir"], "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"), newline="") as f:
                rows = list(csv.DictReader(f))
            for row in rows:  # no ragged rows: quoted shapes stay one cell
                self.assertNotIn(None, row)
                self.assertNotIn(None, row.values())
            got = {}
            for row in rows:
                e = got.setdefault(row["Name"], {"type": row["Type"], "count": 0, "total_us": 0.0})
                e["count"] += 1
                e["total_us"] += float(row["Duration(us)"])
            want = {k["name"]: k for k in rank["kernels"]}
            self.assertEqual(set(got), set(want))
            for name, e in got.items():
                self.assertEqual(e["count"], want[name]["count"], name)
                self.assertEqual(e["type"], want[name]["type"])
                self.assertAlmostEqual(e["total_us"], want[name]["total_us"], delta=0.001 * e["count"])
            self.assertEqual(want["aclnnMatmul_MatMulV3Common_MatMulV3"]["count"], 3 * 5 * 4 * 2)
            # the slow factor is exactly what separates this run from the plain cost model
            reqs = [{"t_start": 0.0, "prompt_tokens": q["prompt_tokens"], "completion_tokens": q["completion_tokens"]}
                    for q in truth["requests_log"]]
            plain = {k["name"]: k for k in kernel_model.summary(kernel_model.tasks(
                reqs, SMALL, 2, rank["device"], {}, rank=rank["rank"]))}
            fia = [n for n in want if want[n]["type"] == FIA][0]
            self.assertAlmostEqual(want[fia]["total_us"] / plain[fia]["total_us"], 2.5, places=3)
            self.assertEqual(want["aclnnSwiGlu_SwiGluAiCore_SwiGlu"]["total_us"],
                             plain["aclnnSwiGlu_SwiGluAiCore_SwiGlu"]["total_us"])
            shapes = {row["Input Shapes"] for row in rows if row["Type"] == "FlashAttentionScore"}
            self.assertEqual(len(shapes), 1)
            self.assertRegex(shapes.pop(), r'^"\d+,\d+,\d+"$')  # the file has """40,8,64"""
        self.assertEqual(len(glob.glob(os.path.join(root, "*_ascend_pt"))), 2)


if __name__ == "__main__":
    unittest.main()
