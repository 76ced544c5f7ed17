"""Command-line flags of `vllm serve` and of the older
`python -m vllm.entrypoints.openai.api_server` (same flags, --model instead of
the positional). Unknown flags are rejected like the real CLI (exit 2,
"unrecognized arguments")."""
import argparse
import json


def _json_arg(text):
    try:
        return json.loads(text)
    except ValueError:
        raise argparse.ArgumentTypeError("invalid JSON: %r" % text)


def _bool_flag(ap, name, **kw):
    ap.add_argument(name, action=argparse.BooleanOptionalAction, default=None, **kw)


def add_engine_flags(ap):
    ap.add_argument("--host", default=None)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-model-name", nargs="+", default=None)
    ap.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    ap.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    ap.add_argument("--data-parallel-size-local", "-dpl", type=int, default=None)
    ap.add_argument("--data-parallel-start-rank", "-dpr", type=int, default=None)
    ap.add_argument("--data-parallel-address", "-dpa", default=None)
    ap.add_argument("--data-parallel-rpc-port", "-dpp", type=int, default=None)
    ap.add_argument("--data-parallel-backend", "-dpb", default="mp")
    ap.add_argument("--data-parallel-hybrid-lb", "-dph", action="store_true", default=False)
    ap.add_argument("--data-parallel-external-lb", "-dpe", action="store_true", default=False)
    ap.add_argument("--headless", action="store_true", default=False)
    ap.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    ap.add_argument("--max-model-len", type=int, default=None)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--max-num-seqs", type=int, default=None)
    ap.add_argument("--max-num-batched-tokens", type=int, default=None)
    ap.add_argument("--enforce-eager", action="store_true", default=False)
    ap.add_argument("--compilation-config", "-O", type=_json_arg, default=None)
    ap.add_argument("--speculative-config", type=_json_arg, default=None)
    ap.add_argument("--profiler-config", type=_json_arg, default=None)
    ap.add_argument("--additional-config", type=_json_arg, default=None)
    ap.add_argument("--enable-expert-parallel", action="store_true", default=False)
    ap.add_argument("--trust-remote-code", action="store_true", default=False)
    ap.add_argument("--api-server-count", type=int, default=None)
    ap.add_argument("--quantization", "-q", default=None)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--kv-cache-dtype", default="auto")
    # vLLM's kv_cache_memory_bytes (it suggests `--kv-cache-memory=N` in its log): bytes, not a share
    ap.add_argument("--kv-cache-memory-bytes", "--kv-cache-memory", dest="kv_cache_memory_bytes", type=int,
                    default=None)
    ap.add_argument("--block-size", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--distributed-executor-backend", default=None)
    ap.add_argument("--uvicorn-log-level", default="info")
    ap.add_argument("--disable-log-stats", action="store_true", default=False)
    ap.add_argument("--disable-log-requests", action="store_true", default=False)
    ap.add_argument("--enable-log-requests", action="store_true", default=False)
    _bool_flag(ap, "--enable-prefix-caching")
    _bool_flag(ap, "--enable-chunked-prefill")
    ap.add_argument("--load-format", default="auto")
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--chat-template", default=None)
    ap.add_argument("--generation-config", default="auto")
    ap.add_argument("--limit-mm-per-prompt", type=_json_arg, default=None)


def parse_serve(argv):
    """argv after `vllm` (starting with `serve`)."""
    if argv in (["--version"], ["-v"]):
        print("0.18.0")
        raise SystemExit(0)
    ap = argparse.ArgumentParser(prog="vllm", description="vLLM CLI")
    sub = ap.add_subparsers(dest="subcommand")
    sp = sub.add_parser("serve", prog="vllm serve", help="Start the vLLM OpenAI Compatible API server.")
    sp.add_argument("model_tag", nargs="?", default=None)
    sp.add_argument("--model", default=None)
    add_engine_flags(sp)
    args = ap.parse_args(argv)
    if args.subcommand != "serve":
        ap.print_help()
        raise SystemExit(2 if args.subcommand is None else 0)
    args.model = args.model_tag or args.model or "Qwen/Qwen3-0.6B"
    return args


def parse_api_server(argv):
    ap = argparse.ArgumentParser(prog="api_server.py",
                                 description="vLLM OpenAI-Compatible RESTful API server.")
    ap.add_argument("--model", default="Qwen/Qwen3-0.6B")
    add_engine_flags(ap)
    return ap.parse_args(argv)
