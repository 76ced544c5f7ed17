"""Simulated torch_npu.profiler.profiler: analyse(profiler_path, max_process_number, export_type)."""
from npusim.analyse_impl import analyse  # noqa: F401
