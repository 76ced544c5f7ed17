"""make_model.py: valid safetensors headers, sparse data, real tensor names,
shard rules of the simulator's classifier."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from .sim_harness import SIM_DIR
from npusim import safetensors_io, weight_shard


class ModelFixture(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="npusim-mf-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def make(self, *args):
        out = os.path.join(self.tmp, "m%d" % len(os.listdir(self.tmp)))
        r = subprocess.run([sys.executable, os.path.join(SIM_DIR, "make_model.py"), "--out", out] + list(args),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out, json.loads(r.stdout)

    def test_headers_valid_and_sparse(self):
        out, summary = self.make("--kind", "dense", "--shards", "3")
        self.assertEqual(len(summary["files"]), 3)
        total = 0
        for fname in summary["files"]:
            path = os.path.join(out, fname)
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            self.assertEqual(n % 8, 0)
            self.assertEqual(header["__metadata__"], {"format": "pt"})
            end = 0
            for name, info in header.items():
                if name == "__metadata__":
                    continue
                b, e = info["data_offsets"]
                self.assertEqual(e - b, safetensors_io.tensor_bytes(info["dtype"], info["shape"]))
                end = max(end, e)
                total += e - b
            st = os.stat(path)
            self.assertEqual(st.st_size, 8 + n + end)
            self.assertLess(st.st_blocks * 512, 1024 * 1024, "data region must be a sparse hole")
        self.assertEqual(total, summary["total_bytes"])
        self.assertGreater(total, 10 * 2 ** 30)
        with open(os.path.join(out, "model.safetensors.index.json")) as f:
            self.assertEqual(json.load(f)["metadata"]["total_size"], total)
        with open(os.path.join(out, "config.json")) as f:
            self.assertEqual(json.load(f)["num_hidden_layers"], 28)

    def test_kinds_have_their_tensor_names(self):
        expect = {"dense": ["model.layers.0.self_attn.q_proj.weight", "lm_head.weight"],
                  "moe": ["model.layers.1.mlp.experts.0.gate_proj.weight", "model.layers.1.mlp.shared_experts.up_proj.weight",
                          "model.layers.1.mlp.gate.weight", "model.layers.0.self_attn.kv_a_proj_with_mqa.weight"],
                  "mtp": ["mtp.layers.0.mlp.experts.0.up_proj.weight", "mtp.fc.weight", "mtp.norm.weight"],
                  "vision": ["visual.blocks.0.attn.qkv.weight", "visual.merger.mlp.0.weight"],
                  "hybrid": ["model.layers.0.linear_attn.in_proj_qkv.weight", "model.layers.0.linear_attn.A_log",
                             "model.layers.3.self_attn.q_proj.weight"]}
        for kind, names in expect.items():
            with self.subTest(kind=kind):
                out, _ = self.make("--kind", kind, "--layers", "4")
                t = {n: (d, s) for n, d, s, _b in safetensors_io.model_tensors(out)}
                for n in names:
                    self.assertIn(n, t)
                if kind == "hybrid":
                    self.assertEqual(t["model.layers.0.linear_attn.A_log"][0], "F32")
                    self.assertEqual(t["model.layers.0.linear_attn.in_proj_qkv.weight"][0], "BF16")

    def test_f32_dtype(self):
        out, summary = self.make("--kind", "dense", "--layers", "2", "--dtype", "f32")
        self.assertEqual({d for _n, d, _s, _b in safetensors_io.model_tensors(out)}, {"F32"})

    def test_shard_rules(self):
        out, _ = self.make("--kind", "moe", "--layers", "3", "--experts", "8")
        t = safetensors_io.model_tensors(out)
        tp2 = weight_shard.per_device(t, 2)
        ep4 = weight_shard.per_device(t, 2, dp=2, expert_parallel=True)
        cats = tp2["by_category"]
        self.assertEqual(cats["mlp_experts"]["strategy"], weight_shard.EP)
        self.assertEqual(cats["mlp_router_gate"]["strategy"], weight_shard.REPL)
        self.assertEqual(cats["norm"]["strategy"], weight_shard.REPL)
        self.assertEqual(tp2["ep"], 2)
        self.assertEqual(ep4["ep"], 4)
        e = cats["mlp_experts"]["bytes"]
        self.assertAlmostEqual(tp2["per_device_bytes"] - ep4["per_device_bytes"], e / 2 - e / 4, places=3)
        self.assertEqual(weight_shard.classify("model.layers.0.self_attn.q_b_proj.weight"),
                         ("attention_qkvo", weight_shard.TP))
        self.assertEqual(weight_shard.classify("model.embed_tokens.weight"), ("embedding", weight_shard.TP))
        self.assertEqual(weight_shard.classify("model.layers.0.mlp.down_proj.weight_scale"),
                         ("quant_params", weight_shard.REPL))

    def test_reject_absurd_header(self):
        p = os.path.join(self.tmp, "bad.safetensors")
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", 200 * 1024 * 1024))
        with self.assertRaises(ValueError):
            safetensors_io.read_header(p)


if __name__ == "__main__":
    unittest.main()
