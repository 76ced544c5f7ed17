"""vLLM / vllm-ascend log line formats by style (README.md, "Log styles").
A Logger knows its style and process prefix and
writes complete lines to stdout (vLLM's handler) or stderr (uvicorn, tqdm,
tracebacks)."""
import os
import sys
import time

from . import sim_clock

STYLES = ("old", "new", "ascend")
CYAN_OLD = ("\x1b[1;36m", "\x1b[0;0m")


def stamp():
    return sim_clock.strftime("%m-%d %H:%M:%S")


class Logger:
    def __init__(self, style, prefix="", ansi=None):
        if style not in STYLES:
            style = "ascend"
        self.style = style
        self.prefix = prefix
        self.ansi = (style in ("old", "new")) if ansi is None else bool(ansi)

    def _pre(self):
        if not self.prefix:
            return ""
        if self.ansi:
            return "%s%s%s " % (CYAN_OLD[0], self.prefix, CYAN_OLD[1])
        return self.prefix + " "

    def line(self, level, fileinfo, msg, stream=None):
        if self.style == "old":
            head = "%s %s %s] " % (level, stamp(), fileinfo)
        else:
            head = "%s %s [%s] " % (level, stamp(), fileinfo)
        # NewLineFormatter: every \n inside a message becomes \r\n + full prefix.
        text = self._pre() + head + msg.replace("\n", "\r\n" + self._pre() + head)
        (stream or sys.stdout).write(text + "\n")
        (stream or sys.stdout).flush()

    def info(self, fileinfo, msg):
        self.line("INFO", fileinfo, msg)

    def debug(self, fileinfo, msg):
        """Printed only with VLLM_LOGGING_LEVEL=DEBUG, as vLLM's debug lines."""
        if os.environ.get("VLLM_LOGGING_LEVEL", "INFO").upper() == "DEBUG":
            self.line("DEBUG", fileinfo, msg)

    def warning(self, fileinfo, msg):
        self.line("WARNING", fileinfo, msg)

    def error(self, fileinfo, msg):
        self.line("ERROR", fileinfo, msg, stream=sys.stderr)

    def raw(self, text, stream=None):
        s = stream or sys.stdout
        s.write(self._pre() + text + "\n")
        s.flush()


def worker_prefix(style, rank, pid, tp, dp, ep_rank=None):
    """Per-rank process prefix for tp*dp > 1 (None: the EngineCore prints)."""
    if style == "old":
        return "" if rank == 0 else "(VllmWorkerProcess pid=%d)" % pid
    if style == "new":
        return "(VllmWorker rank=%d pid=%d)" % (rank, pid)
    name = "Worker"
    if dp > 1:
        name += "_DP%d" % (rank // tp)
    name += "_TP%d" % (rank % tp)
    if ep_rank is not None:
        name += "_EP%d" % ep_rank
    return "(%s pid=%d)" % (name, pid)


def engine_prefix(style, pid, dp, dp_rank=0):
    if style == "old":
        return ""
    if style == "new":
        return "(EngineCore_%d pid=%d)" % (dp_rank, pid) if dp > 1 else ""
    return "(EngineCore_DP%d pid=%d)" % (dp_rank, pid) if dp > 1 else "(EngineCore pid=%d)" % pid


def api_prefix(style, pid):
    return "(APIServer pid=%d)" % pid if style == "ascend" else ""


def tqdm_bar(label, n, secs, stream=None):
    s = stream or sys.stderr
    rate = n / max(secs, 0.01)
    s.write("%s:   0%% Completed | 0/%d [00:00<?, ?it/s]\r" % (label, n))
    s.write("%s: 100%% Completed | %d/%d [00:%02d<00:00, %6.2fit/s]\n" % (label, n, n, int(secs), rate))
    s.flush()


def graph_bar(n, secs, stream=None):
    s = stream or sys.stderr
    bar = "\u2588" * 30
    s.write("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%%|%s| %d/%d [00:%02d<00:00, %5.2fit/s]\n"
            % (bar, n, n, int(secs), n / max(secs, 0.01)))
    s.flush()


ROUTES = [("/openapi.json", "HEAD, GET"), ("/docs", "HEAD, GET"), ("/health", "GET"), ("/load", "GET"),
          ("/ping", "POST"), ("/ping", "GET"), ("/version", "GET"), ("/v1/models", "GET"),
          ("/v1/chat/completions", "POST"), ("/v1/completions", "POST"), ("/tokenize", "POST"),
          ("/detokenize", "POST"), ("/metrics", "GET")]


def uvicorn_info(level):
    """Whether uvicorn prints its INFO lines ("Application startup complete.", ...) at
    --uvicorn-log-level `level` (vLLM passes it to uvicorn; default info)."""
    return str(level).lower() in ("trace", "debug", "info")


def readiness(api, style, host, port, pid, profiler_routes, uvicorn_level="info"):
    """The lines a server prints when it starts answering (api: the API-server Logger)."""
    url = "http://%s:%d" % (host, port)
    routes = ROUTES + ([("/start_profile", "POST"), ("/stop_profile", "POST")] if profiler_routes else [])
    if style == "old":
        api.info("api_server.py:641", "Using supplied chat template:\nNone")
        api.info("launcher.py:19", "Available routes are:")
        for r, m in routes:
            api.info("launcher.py:27", "Route: %s, Methods: %s" % (r, m))
    else:
        if style == "new":
            api.info("api_server.py:1818", "Starting vLLM API server 0 on %s" % url)
        else:
            api.info("api_server.py:580", "Starting vLLM server on %s" % url)
        li = "launcher.py:37" if style == "ascend" else "launcher.py:29"
        lr = "launcher.py:46" if style == "ascend" else "launcher.py:37"
        api.info(li, "Available routes are:")
        for r, m in routes:
            api.info(lr, "Route: %s, Methods: %s" % (r, m))
    err = sys.stdout if style == "ascend" else sys.stderr
    if not uvicorn_info(uvicorn_level):
        return
    api.raw("INFO:     Started server process [%d]" % pid, err)
    api.raw("INFO:     Waiting for application startup.", err)
    api.raw("INFO:     Application startup complete.", err)
    if style == "old":
        api.raw("INFO:     Uvicorn running on %s (Press CTRL+C to quit)" % url, err)
