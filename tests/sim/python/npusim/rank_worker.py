"""One simulated rank process (python3 -m npusim.rank_worker '<json>').

It prints the per-rank start-up lines in the configured style, tells the
API-server process how far it got through a pipe (L = weights loaded,
P = memory-profiling run started, K = KV cache sized and allocated,
G = graphs captured), then idles until SIGTERM/SIGINT or
until its parent dies. Its pid is what npu-smi lists on its device."""
import json
import os
import signal
import sys
import time

from .log_lines import Logger, graph_bar, tqdm_bar

_stop = False


def _on_signal(_s, _f):
    global _stop
    _stop = True


def _set_pdeathsig():
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _sleep(secs, ppid):
    end = time.time() + secs
    while not _stop and time.time() < end:
        if os.getppid() != ppid:
            sys.exit(0)
        time.sleep(min(0.05, max(0.0, end - time.time())))


KV_MANUAL_LINE = ("Initial free memory %s GiB, reserved %s GiB memory for KV Cache as specified by "
                  "kv_cache_memory_bytes config and skipped memory profiling. This does not respect the "
                  "gpu_memory_utilization config. Only use kv_cache_memory_bytes config when you want manual "
                  "control of KV cache memory size. If OOM'ed, check the difference of initial free memory between "
                  "the current run and the previous run where kv_cache_memory_bytes is suggested and update it "
                  "correspondingly.")


def main(argv):
    spec = json.loads(argv[0])
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    _set_pdeathsig()
    ppid = spec["ppid"]
    fd = spec["fd"]
    style = spec["style"]
    pid = os.getpid()
    from .log_lines import engine_prefix, worker_prefix
    if spec["world"] > 1:
        prefix = worker_prefix(style, spec["rank"] if style != "new" else spec["tp_rank"], pid,
                               spec["tp"], spec["dp"], spec.get("ep_rank"))
        if style == "new" and spec["tp"] == 1:
            prefix = engine_prefix(style, pid, spec["dp"], spec["dp_rank"])
    else:
        prefix = engine_prefix(style, pid, spec["dp"], 0)
    log = Logger(style, prefix, spec.get("ansi"))
    first = spec["tp_rank"] == 0
    # The first rank of this host prints the engine's memory lines: rank 0 on
    # one host, the first rank of each node of a multi-node deployment (a
    # headless node's engine logs to that node's own stdout).
    node_first = spec.get("local_rank", spec["rank"]) == 0
    step = spec["startup"]
    p = spec["printed"]

    def signal_main(ch):
        try:
            os.write(fd, ch.encode())
        except OSError:
            pass

    if style == "ascend":
        log.info("parallel_state.py:1395", "world_size=%d rank=%d local_rank=%d distributed_init_method=tcp://127.0.0.1:%d backend=hccl"
                 % (spec["world"], spec["rank"], spec.get("local_rank", spec["rank"]), 29500))
        log.info("model_runner_v1.py:2562", "Starting to load model %s..." % spec["model"])
    # A multi-node node loaded its weights before it joined (serve_main.py): that much is done.
    _sleep(max(0.0, step * 0.3 - float(spec.get("loaded_before_s") or 0.0)), ppid)
    if spec["rank"] == 0:
        tqdm_bar("Loading safetensors checkpoint shards", spec["shards"], step * 0.3)
    if style == "old":
        log.info("model_runner.py:1116", "Loading model weights took %s GB" % p["weights_gib"])
    elif style == "new":
        log.info("gpu_model_runner.py:1892", "Model loading took %s GiB and %.6f seconds"
                 % (p["weights_gib"], step * 0.3))
    else:
        if spec["rank"] == 0:
            log.info("default_loader.py:384", "Loading weights took %.2f seconds" % (step * 0.3))
        log.info("model_runner_v1.py:2589", "Loading model weights took %s GB" % p["weights_gib"])
    if spec.get("vision") and spec["rank"] == 0 and style != "old":
        log.info("gpu_model_runner.py:5488", "Encoder cache will be initialized with a budget of %d tokens, and "
                 "profiled with 1 image items of the maximum feature size." % spec["max_num_batched_tokens"])
    signal_main("L")
    _sleep(step * 0.1, ppid)
    signal_main("P")  # vLLM's memory-profiling forward pass (activation peak) starts
    _sleep(step * 0.2, ppid)
    if style == "old":
        m = spec["v0_profile"]
        log.info("worker.py:266", "Memory profiling takes %.2f seconds\nthe current vLLM instance can use total_gpu_memory (%.2fGiB) x gpu_memory_utilization (%.2f) = %.2fGiB\nmodel weights take %.2fGiB; non_torch_memory takes %.2fGiB; PyTorch activation peak memory takes %.2fGiB; the rest of the memory reserved for KV Cache is %sGiB."
                 % (step * 0.3, m["total_gib"], m["util"], m["total_gib"] * m["util"], m["weights_gib"],
                    m["non_torch_gib"], m["activation_gib"], p["kv_cache_gib"]))
    elif style == "new" or node_first:
        if style == "ascend":
            log.info("monitor.py:48", "torch.compile and initial profiling/warmup run together took %.2f s in total" % (step * 0.3))
        else:
            log.info("monitor.py:34", "torch.compile takes %.2f s in total" % (step * 0.3))
        if p.get("kv_manual"):  # --kv-cache-memory: vLLM reserves that much and skips its budget
            log.info("worker.py:340" if style == "ascend" else "gpu_worker.py:240", KV_MANUAL_LINE % (
                p["kv_manual"]["initial_free_gib"], p["kv_manual"]["reserved_gib"]))
        else:
            log.info("worker.py:357" if style == "ascend" else "gpu_worker.py:255",
                     "Available KV cache memory: %s GiB" % p["kv_cache_gib"])
    signal_main("K")
    _sleep(step * 0.2, ppid)
    if p.get("graph_capture_gib") is not None:
        if spec["rank"] == 0:
            graph_bar(spec.get("graph_sizes", 35), step * 0.2)
        if style == "old":
            log.info("model_runner.py:1569", "Graph capturing finished in %d secs, took %s GiB"
                     % (max(1, round(step * 0.2)), p["graph_capture_gib"]))
        elif style == "new" or node_first:
            log.info("gpu_model_runner.py:2472" if style == "new" else "gpu_model_runner.py:5746",
                     "Graph capturing finished in %d secs, took %s GiB" % (max(1, round(step * 0.2)), p["graph_capture_gib"]))
    elif style == "ascend" and spec["rank"] == 0:
        log.info("model_runner_v1.py:3013", "Skipping NPU graph capture for eager mode.")
    signal_main("G")
    while not _stop:
        if os.getppid() != ppid:
            break
        time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
