"""One TCP connection between a data-parallel head and one node of its
deployment, carrying the simulator's line-JSON protocol (README.md
"Multi-node data parallel"): every message is one JSON object on one line.

A message with an "id" expects an answer: the peer sends an object with
"reply_to": <id>. Link.call sends and waits (polling, with a timeout) for
that answer; everything else goes to the on_message callback, on the
link's reader thread (a handler that blocks should start its own thread).
When the peer goes away (EOF, reset) every waiting call returns None and
on_close runs once."""
import itertools
import json
import socket
import threading

MAX_LINE = 1 << 20


def encode(msg):
    return (json.dumps(msg, separators=(",", ":")) + "\n").encode()


def read_message(rfile):
    """One message from a socket's binary file; None at EOF or on a malformed line."""
    line = rfile.readline(MAX_LINE)
    if not line:
        return None
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


class Link:
    def __init__(self, sock, rfile, on_message, on_close, name=""):
        self.sock = sock
        self.rfile = rfile
        self.name = name
        self.on_message = on_message
        self.on_close = on_close
        self.closed = threading.Event()
        self._wlock = threading.Lock()
        self._plock = threading.Lock()
        self._pending = {}   # id -> [threading.Event, reply]
        self._ids = itertools.count(1)
        self._thread = None

    def start(self):
        self.sock.settimeout(None)
        self._thread = threading.Thread(target=self._read_loop, name="dp-link-" + self.name, daemon=True)
        self._thread.start()
        return self

    def send(self, msg):
        """False when the peer is gone."""
        if self.closed.is_set():
            return False
        try:
            with self._wlock:
                self.sock.sendall(encode(msg))
            return True
        except OSError:
            return False

    def reply(self, request, **fields):
        fields["reply_to"] = request.get("id")
        return self.send(fields)

    def call(self, msg, timeout):
        """Send msg and wait for its answer: the reply dict, or None (peer gone or timed out)."""
        mid = next(self._ids)
        slot = [threading.Event(), None]
        with self._plock:
            self._pending[mid] = slot
        msg = dict(msg, id=mid)
        try:
            if not self.send(msg):
                return None
            slot[0].wait(timeout)
            return slot[1]
        finally:
            with self._plock:
                self._pending.pop(mid, None)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def _read_loop(self):
        try:
            while True:
                try:
                    msg = read_message(self.rfile)
                except (OSError, ValueError):
                    msg = None
                if msg is None:
                    break
                if "reply_to" in msg:
                    with self._plock:
                        slot = self._pending.get(msg["reply_to"])
                    if slot is not None:
                        slot[1] = msg
                        slot[0].set()
                    continue
                try:
                    self.on_message(self, msg)
                except Exception as e:  # a handler's bug must not look like a lost peer
                    import sys
                    sys.stderr.write("dp link %s: message handler failed: %r\n" % (self.name, e))
        finally:
            self.closed.set()
            with self._plock:
                for slot in self._pending.values():
                    slot[0].set()
            self.close()
            if self.on_close:
                self.on_close(self)
