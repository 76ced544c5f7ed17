"""The OpenAI-compatible HTTP surface of the simulated vLLM server:
/health, /v1/models, /v1/completions, /v1/chat/completions,
/start_profile, /stop_profile."""
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import sim_clock


def count_tokens(text):
    return max(1, len(str(text).split()))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    service = None  # set by make_server

    def log_message(self, fmt, *args):  # uvicorn access-log shape, on stdout
        pass

    def _access(self, code):
        phrase = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error",
                  503: "Service Unavailable"}.get(code, "")
        self.service.api_log.raw('INFO:     %s:%d - "%s %s HTTP/1.1" %d %s'
                                 % (self.client_address[0], self.client_address[1], self.command, self.path,
                                    code, phrase))

    def _send(self, code, body=None, ctype="application/json"):
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if data and self.command != "HEAD":
            self.wfile.write(data)
        self._access(code)

    def _error(self, code, message, typ):
        self._send(code, {"error": {"message": message, "type": typ, "param": None, "code": code}})

    def _read_raw(self):
        n = int(self.headers.get("content-length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        svc = self.service
        path = self.path.split("?")[0]
        if path == "/health":
            return self._send(200, b"", "application/json")
        if path == "/v1/models":
            return self._send(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": int(svc.started), "owned_by": "vllm",
                 "root": svc.model, "parent": None, "max_model_len": svc.max_model_len,
                 "permission": [{"id": "modelperm-" + uuid.uuid4().hex, "object": "model_permission",
                                 "created": int(svc.started), "allow_create_engine": False, "allow_sampling": True,
                                 "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                 "allow_fine_tuning": False, "organization": "*", "group": None,
                                 "is_blocking": False}]} for name in svc.served_names]})
        if path in ("/ping", "/version"):
            return self._send(200, {"version": "0.18.0"} if path == "/version" else b"")
        return self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        svc = self.service
        path = self.path.split("?")[0]
        raw = self._read_raw()  # always consume the body: the connection may be kept alive
        try:
            if path in ("/start_profile", "/stop_profile"):
                if not svc.profiler_enabled:
                    return self._send(404, {"detail": "Not Found"})
                code, msg = svc.profile_control(path == "/start_profile")
                if code != 200:
                    return self._send(code, {"error": {"message": msg, "type": "InternalServerError",
                                                        "param": None, "code": code}})
                return self._send(200, b"")
            if path not in ("/v1/completions", "/v1/chat/completions"):
                return self._send(404, {"detail": "Not Found"})
            try:
                body = json.loads(raw) if raw else {}
                if not isinstance(body, dict):
                    raise ValueError
            except ValueError:
                return self._error(400, "Invalid JSON body", "BadRequestError")
            chat = path == "/v1/chat/completions"
            model = body.get("model", svc.served_name)
            if model not in svc.served_names:
                return self._error(404, "The model `%s` does not exist." % model, "NotFoundError")
            if chat:
                msgs = body.get("messages")
                if not isinstance(msgs, list) or not msgs:
                    return self._error(400, "messages must be a non-empty list", "BadRequestError")
                prompt_tokens, images = 0, 0
                for m in msgs:
                    c = m.get("content", "")
                    if isinstance(c, list):
                        for part in c:
                            if part.get("type") == "text":
                                prompt_tokens += count_tokens(part.get("text", ""))
                            elif part.get("type") == "image_url":
                                images += 1
                    else:
                        prompt_tokens += count_tokens(c)
                prompt_tokens += images * svc.image_tokens + 4 * len(msgs)
                max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or 16
            else:
                prompt = body.get("prompt")
                if prompt is None:
                    return self._error(400, "prompt is required", "BadRequestError")
                prompt_tokens = count_tokens(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))
                max_tokens = body.get("max_tokens") or 16
            max_tokens = int(max_tokens)
            if prompt_tokens + max_tokens > svc.max_model_len:
                return self._error(400, "This model's maximum context length is %d tokens. However, you requested "
                                   "%d tokens (%d in the messages, %d in the completion). Please reduce the length "
                                   "of the messages or completion." % (svc.max_model_len, prompt_tokens + max_tokens,
                                                                      prompt_tokens, max_tokens), "BadRequestError")
            ok = svc.run_request("chat" if chat else "completion", prompt_tokens, max_tokens)
            if not ok:
                return self._error(500, "Simulated engine failure while generating", "InternalServerError")
            text = " ".join("tok%d" % (i % 97) for i in range(max_tokens))
            usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + max_tokens,
                     "completion_tokens": max_tokens, "prompt_tokens_details": None}
            now = int(sim_clock.now())
            if chat:
                return self._send(200, {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion",
                                        "created": now, "model": svc.served_name,
                                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                                                             "refusal": None, "tool_calls": [],
                                                                             "reasoning_content": None},
                                                     "logprobs": None, "finish_reason": "length",
                                                     "stop_reason": None}],
                                        "usage": usage, "prompt_logprobs": None})
            return self._send(200, {"id": "cmpl-" + uuid.uuid4().hex, "object": "text_completion", "created": now,
                                    "model": svc.served_name,
                                    "choices": [{"index": 0, "text": text, "logprobs": None,
                                                 "finish_reason": "length", "stop_reason": None,
                                                 "prompt_logprobs": None}],
                                    "usage": usage})
        except (BrokenPipeError, ConnectionResetError):
            return None

    do_HEAD = do_GET


def make_server(service, host, port):
    handler = type("BoundHandler", (Handler,), {"service": service})
    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer((host, port), handler)
    srv.daemon_threads = True
    return srv


def serve_in_thread(srv):
    th = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    th.start()
    return th

