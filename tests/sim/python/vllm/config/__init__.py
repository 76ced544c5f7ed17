"""Simulated vllm.config (npuprof test simulator): only ProfilerConfig, a
dataclass whose field names are those of the current vLLM's
(vllm/config/profiler.py) unless the target's config `vllm.profiler_fields`
names others (an older or a patched vLLM). The fields are read when the
module is imported, so `setup_target.py --update --set vllm.profiler_fields=[...]`
applies to the next service start and the next check."""
import dataclasses

from npusim import serve_profiler

ProfilerConfig = dataclasses.make_dataclass(
    "ProfilerConfig", [(name, object, dataclasses.field(default=None)) for name in serve_profiler.profiler_fields()])
