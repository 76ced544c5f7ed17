"""Simulated torch_npu.profiler."""
from .profiler import analyse  # noqa: F401
