#!/usr/bin/env python3
"""Model fixture generator. See README.md ("make_model.py")."""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from npusim.model_fixture import make_model  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="write a sparse safetensors model fixture")
    ap.add_argument("--out", required=True)
    ap.add_argument("--kind", choices=["dense", "moe", "mtp", "vision", "hybrid"], default="dense")
    ap.add_argument("--dtype", choices=["bf16", "f32", "f16"], default="bf16")
    ap.add_argument("--shards", type=int, default=1)
    for name in ["layers", "hidden", "intermediate", "vocab", "heads", "kv-heads", "head-dim", "experts",
                 "moe-intermediate", "shared-experts", "mtp-layers", "vision-depth", "vision-hidden",
                 "vision-intermediate", "first-dense"]:
        ap.add_argument("--" + name, type=int, default=None)
    ap.add_argument("--tie-embeddings", action="store_true", default=None, dest="tie")
    ap.add_argument("--size-scale", type=float, default=None,
                    help="multiply layers (and experts for moe/mtp) by this factor")
    a = ap.parse_args(argv)
    over = {k.replace("-", "_"): getattr(a, k.replace("-", "_")) for k in
            ["layers", "hidden", "intermediate", "vocab", "heads", "kv_heads", "head_dim", "experts",
             "moe_intermediate", "shared_experts", "mtp_layers", "vision_depth", "vision_hidden",
             "vision_intermediate", "first_dense"]}
    over["tie"] = a.tie
    if a.size_scale:
        from npusim.model_fixture import DEFAULTS
        base = DEFAULTS[a.kind]
        over["layers"] = max(1, int(round((over["layers"] or base["layers"]) * a.size_scale)))
    summary = make_model(a.out, kind=a.kind, dtype=a.dtype, shards=a.shards, **over)
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
