"""Simulated Ascend NPU target: shared library of the npu-smi, vllm, msprof
and torch_npu simulators. Stdlib only. See tests/sim/README.md."""
