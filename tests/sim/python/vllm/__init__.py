"""Simulated vLLM package (npuprof test simulator). Only the OpenAI API
server entry point exists: python3 -m vllm.entrypoints.openai.api_server."""
__version__ = "0.18.0"
