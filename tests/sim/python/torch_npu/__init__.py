"""Simulated torch_npu (npuprof test simulator): only the offline profiler
parser exists, torch_npu.profiler.profiler.analyse()."""
__version__ = "2.5.1.post1"

# The import is the target's work too (a real torch_npu takes seconds): the
# simulator's timeline records it from the interpreter's start.
try:
    from npusim import work_timeline as _timeline

    _timeline.record_process_start("torch_npu_import")
except ImportError:
    pass
