"""Simulated torch_npu (npuprof test simulator): only the offline profiler
parser exists, torch_npu.profiler.profiler.analyse()."""
__version__ = "2.5.1.post1"
