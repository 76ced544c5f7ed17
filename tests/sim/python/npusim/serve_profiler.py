"""What the simulated vLLM makes of --profiler-config (npuprof test
simulator): the ProfilerConfig fields it declares (the target's config
`vllm.profiler_fields`, null = the current vLLM's list below) and the check
a real vLLM does when it builds ProfilerConfig from the JSON (an unknown key
is an error at start-up). The window fields (delay_iterations,
max_iterations) are recorded in the truth record, not modelled."""
from npusim import sim_root

# The current vLLM's ProfilerConfig fields (vllm/config/profiler.py).
CURRENT_FIELDS = ("profiler", "torch_profiler_dir", "torch_profiler_with_stack", "torch_profiler_with_flops",
                  "torch_profiler_use_gzip", "torch_profiler_dump_cuda_time_total", "torch_profiler_record_shapes",
                  "torch_profiler_with_memory", "ignore_frontend", "delay_iterations", "max_iterations")


def profiler_fields(cfg=None):
    if cfg is None:
        try:
            cfg = sim_root.load_config()
        except (sim_root.SimError, OSError, ValueError):
            cfg = {}
    names = (cfg.get("vllm") or {}).get("profiler_fields")
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return tuple(names)
    return CURRENT_FIELDS


def unknown_keys(profiler_config, cfg):
    """The keys of the given --profiler-config that this vLLM's ProfilerConfig lacks."""
    known = set(profiler_fields(cfg))
    return sorted(k for k in (profiler_config or {}) if k not in known)

