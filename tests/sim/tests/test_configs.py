"""Configurations a sweep varies: KV cache follows --gpu-memory-utilization
(util x total minus everything else, as vLLM budgets it), weights per
device follow tp (shard rules), other processes' HBM on a device shrinks its
KV cache; the truth of each is per device."""
import math
import unittest

from .sim_harness import SimTestCase, parse_npu_smi, small_model
from npusim import layouts, memory_plan, safetensors_io, weight_shard

GIB = 1024.0


def plan(util=0.9, tp=1, n=None, cfg=None, eager=False):
    devs = layouts.make_devices("910B3", 8, None, None, 2862)
    return memory_plan.plan(dict({"memory": {}}, **(cfg or {})), small_model(), devs[:n or tp], tp, 1, False, util,
                            4096, eager, None)


class UtilisationSweep(unittest.TestCase):
    def test_kv_follows_utilisation_and_weights_do_not(self):
        a, b = plan(0.8), plan(0.9)
        ra, rb = a["ranks"][0], b["ranks"][0]
        self.assertEqual(ra["components_mb"]["weights"], rb["components_mb"]["weights"])
        delta = rb["components_mb"]["kv_cache"] - ra["components_mb"]["kv_cache"]
        self.assertAlmostEqual(delta, 0.1 * 65536, delta=10.24)  # both floored to 0.01 GiB
        for r, util in ((ra, 0.8), (rb, 0.9)):
            kb = r["kv_budget"]
            self.assertEqual(kb["gpu_memory_utilization"], util)
            self.assertAlmostEqual(kb["requested_mb"], 65536 * util)
            self.assertAlmostEqual(kb["available_mb"], kb["requested_mb"] - kb["fixed_mb"] - kb["weights_mb"]
                                   - kb["activation_mb"] - kb["non_torch_mb"])
            self.assertEqual(r["components_mb"]["kv_cache"],
                             math.floor(kb["available_mb"] / GIB * 100 + 1e-9) * GIB / 100)
            self.assertEqual(kb["kv_cache_mb"], r["components_mb"]["kv_cache"])
        self.assertGreater(b["kv_cache_tokens"], a["kv_cache_tokens"])

    def test_forced_kv_ignores_utilisation(self):
        cfg = {"memory": {"kv_cache_gib": 10.0}}
        self.assertEqual(plan(0.8, cfg=cfg)["ranks"][0]["components_mb"]["kv_cache"], 10240.0)
        self.assertTrue(plan(0.8, cfg=cfg)["ranks"][0]["kv_budget"]["forced"])

    def test_too_low_utilisation_refuses_to_start(self):
        with self.assertRaises(ValueError):
            plan(0.05)


class TensorParallelSweep(unittest.TestCase):
    def test_weights_shard_by_tp_and_kv_grows_per_device(self):
        one, two = plan(tp=1), plan(tp=2)
        tensors = safetensors_io.model_tensors(small_model())
        for p, tp in ((one, 1), (two, 2)):
            want = weight_shard.per_device(tensors, tp, 1, False)["per_device_bytes"] / (1 << 20)
            for r in p["ranks"]:
                self.assertAlmostEqual(r["components_mb"]["weights"], want)
        cats = weight_shard.per_device(tensors, 2, 1, False)["by_category"]
        replicated = sum(c["bytes"] for c in cats.values() if c["strategy"] == "replicated") / (1 << 20)
        w1, w2 = one["ranks"][0]["components_mb"]["weights"], two["ranks"][0]["components_mb"]["weights"]
        self.assertAlmostEqual(w2, (w1 - replicated) / 2 + replicated)
        self.assertGreater(replicated, 0)
        self.assertGreater(two["ranks"][0]["components_mb"]["kv_cache"], one["ranks"][0]["components_mb"]["kv_cache"])
        self.assertLess(two["kv_bytes_per_token"], one["kv_bytes_per_token"])
        self.assertEqual(len(two["ranks"]), 2)
        self.assertEqual(two["ranks"][0]["components_mb"], {**two["ranks"][1]["components_mb"]})


class KvCacheDtype(unittest.TestCase):
    def test_a_float32_model_takes_four_bytes_a_value_as_vllms_auto_cache_dtype_does(self):
        mc = {"num_hidden_layers": 4, "num_attention_heads": 28, "num_key_value_heads": 4, "head_dim": 128}
        bf16 = memory_plan.kv_bytes_per_token({**mc, "torch_dtype": "bfloat16"}, 1)
        f32 = memory_plan.kv_bytes_per_token({**mc, "torch_dtype": "float32"}, 1)
        self.assertEqual(bf16, 2 * 4 * 4 * 128 * 2)  # K and V, layers, KV heads, head dim, 2 bytes
        self.assertEqual(f32, 2 * bf16)
        mla = {"num_hidden_layers": 2, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
        self.assertEqual(memory_plan.kv_bytes_per_token({**mla, "torch_dtype": "float32"}, 1),
                         2 * memory_plan.kv_bytes_per_token(mla, 1))


class HcclBufferSize(unittest.TestCase):
    """HCCL per device = HCCL_FIXED_KB + hccl_buffers x HCCL_BUFFSIZE MB; its HBM is non-torch memory in
    vLLM's budget, so a smaller buffer size gives that much to the KV cache."""

    def hccl_plan(self, size, util=0.9):
        devs = layouts.make_devices("910B3", 8, None, None, 2862)
        return memory_plan.plan({"memory": {}}, small_model(), devs[:1], 1, 1, False, util, 4096, False, None,
                                hccl_buffsize_mb=size)

    def test_unset_is_the_default_200(self):
        a, b = self.hccl_plan(None), self.hccl_plan(200)
        self.assertEqual(a["ranks"][0]["msprof_components_kb"]["HCCL"], 612000)
        self.assertEqual(b["ranks"][0]["msprof_components_kb"]["HCCL"], 612000)

    def test_hccl_follows_the_setting_and_the_kv_cache_gets_the_difference(self):
        big, small = self.hccl_plan(1000)["ranks"][0], self.hccl_plan(200)["ranks"][0]
        self.assertEqual(big["msprof_components_kb"]["HCCL"], memory_plan.HCCL_FIXED_KB + 2 * 1000 * 1024)
        self.assertAlmostEqual(big["components_mb"]["hccl"] - small["components_mb"]["hccl"], 1600.0)
        delta = small["components_mb"]["kv_cache"] - big["components_mb"]["kv_cache"]
        self.assertAlmostEqual(delta, 1600.0, delta=10.24)  # both floored to 0.01 GiB
        self.assertEqual(big["npu_smi"]["after_loaded_mb"] - small["npu_smi"]["after_loaded_mb"], 1600)


class KvCacheMemory(unittest.TestCase):
    def test_the_kv_cache_is_the_bytes_given_whatever_the_utilisation(self):
        devs = layouts.make_devices("910B3", 8, None, None, 2862)
        n = 3 * 1024 ** 3 + 12345
        p = memory_plan.plan({"memory": {}}, small_model(), devs[:1], 1, 1, False, 0.5, 4096, False, None,
                             kv_cache_memory_bytes=n)
        r = p["ranks"][0]
        self.assertEqual(r["components_mb"]["kv_cache"], n / (1024.0 * 1024.0))
        self.assertEqual(p["kv_cache_tokens"], n // (128 * p["kv_bytes_per_token"]) * 128)
        self.assertEqual(r["printed"]["kv_manual"]["reserved_gib"], "3.0")


class OtherProcessesOnTheDevice(SimTestCase):
    def test_busy_hbm_counts_as_fixed_and_shrinks_kv(self):
        busy = {"busy": [{"device": 0, "kind": "hbm", "mb": 5000}]}
        free, taken = plan(), plan(cfg=busy)
        self.assertEqual(taken["ranks"][0]["components_mb"]["fixed"], 2862 + 5000)
        self.assertAlmostEqual(free["ranks"][0]["components_mb"]["kv_cache"]
                               - taken["ranks"][0]["components_mb"]["kv_cache"], 5000, delta=10.24)
        # npu-smi and truth agree on a device another process uses
        self.make_target(busy=["0:hbm=5000"])
        p, _port = self.serve(devices="0")
        truth = self.truth()
        devs, _ = parse_npu_smi(self.npu_smi())
        smi = truth["per_device"]["0"]["npu_smi"]
        self.assertEqual(smi["baseline_mb"], 2862 + 5000)
        self.assertEqual(devs[0]["used"], smi["after_ready_mb"])
        self.assertAlmostEqual(sum(truth["per_device"]["0"]["components_mb"].values()), smi["inference_peak_mb"],
                               places=6)
        self.assertEqual(self.stop(p), 0)


if __name__ == "__main__":
    unittest.main()
