"""Older vLLM entry point: python3 -m vllm.entrypoints.openai.api_server --model M [flags]."""
import sys


def main():
    from npusim.serve_main import main_api_server
    return main_api_server(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
