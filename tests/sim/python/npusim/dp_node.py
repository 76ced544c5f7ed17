"""A node of a multi-node data-parallel deployment (headless, or a
secondary with its own API server): its engines connect to the head at
ADDR:PORT (retrying with back-off for multinode.join_timeout_s), say hello,
start once welcomed, report ready, then run what the head sends: the
request wave (busy / idle), requests for their DP ranks, profiler start
and stop, shutdown (README.md "Multi-node data parallel").

Faults: never_join (true: never connects; "wrong_port": connects to the rpc
port + 1), join_delay (seconds before the first attempt)."""
import os
import socket
import threading

from . import dp_link, dp_topology, sim_clock, sim_root


class JoinError(Exception):
    pass


class NodeClient:
    def __init__(self, svc):
        self.svc = svc
        self.topo = svc.topo
        self.link = None
        self.target = dp_topology.resolve(self.topo.address, svc.own_address)
        self.port = self.topo.rpc_port
        self.joined_at = None
        self.connected_to = None
        self.head_pid = None
        self.ready_sent_at = None
        self.deployment_ready_at = None
        self.attempts = 0
        self.shutdown_by_head = False
        self.leaving = False
        self.control_timeout = float(sim_root.multinode(svc.cfg, "control_timeout_s"))

    # ---- joining -----------------------------------------------------------------
    def _connect_once(self):
        """A connected socket, or None (refused, unreachable, not a loopback address)."""
        self.attempts += 1
        if not dp_topology.is_loopback(self.target):
            try:  # a name: what it resolves to, if that is on loopback
                addr = socket.gethostbyname(self.target)
            except OSError:
                return None
            if not dp_topology.is_loopback(addr):
                return None
        try:
            # connect from this host's own address, as a real node's packets come from it
            return socket.create_connection((self.target, self.port), timeout=2.0,
                                            source_address=(self.svc.own_address, 0))
        except OSError:
            return None

    def join(self):
        """Connect, hello, welcome. Returns when welcomed; KeyboardInterrupt when stopped meanwhile;
        JoinError(message) when it gives up or the head refuses."""
        cfg = self.svc.cfg
        stop = self.svc.stop_event
        never = sim_root.fault(cfg, "never_join")
        if never is True or (never and never != "wrong_port"):
            while not stop.wait(0.2):
                pass
            raise KeyboardInterrupt
        if never == "wrong_port":
            self.port += 1
        delay = float(sim_root.fault(cfg, "join_delay", 0) or 0)
        if delay > 0 and stop.wait(delay):
            raise KeyboardInterrupt
        limit = float(sim_root.multinode(cfg, "join_timeout_s"))
        t0 = sim_clock.now()
        backoff = 0.05
        while True:
            if stop.is_set():
                raise KeyboardInterrupt
            sock = self._connect_once()
            if sock is not None:
                break
            if sim_clock.now() - t0 >= limit:
                raise JoinError("TimeoutError: could not reach the data parallel head at tcp://%s:%d after %d "
                                "attempts in %.1f s (connection refused or unreachable)"
                                % (self.topo.address, self.port, self.attempts, sim_clock.now() - t0))
            stop.wait(min(backoff, max(0.01, limit - (sim_clock.now() - t0))))
            backoff = min(1.0, backoff * 2)
        self.connected_to = "%s:%d" % (self.target, self.port)
        sock.settimeout(self.control_timeout)
        rfile = sock.makefile("rb")
        svc = self.svc
        try:
            sock.sendall(dp_link.encode({
                "type": "hello", "node_rank": self.topo.node_rank, "start_rank": self.topo.start_rank,
                "dp_local": self.topo.dp_local, "engines": self.topo.local_dp_ranks, "dp": self.topo.dp,
                "tp": self.topo.tp, "headless": self.topo.headless, "hostname": svc.cfg.get("hostname"),
                "address": svc.own_address, "pid": svc.pid, "instance": svc.instance,
                "clock_offset_s": sim_clock.offset()}))
            answer = dp_link.read_message(rfile)
        except OSError:
            answer = None
        if not answer or answer.get("type") != "welcome":
            sock.close()
            why = (answer or {}).get("error") or "the head closed the connection during the handshake"
            raise JoinError("RuntimeError: the data parallel head at tcp://%s:%d refused this node's engines: %s"
                            % (self.topo.address, self.port, why))
        self.head_pid = answer.get("head_pid")
        self.joined_at = round(sim_clock.now(), 6)
        self.link = dp_link.Link(sock, rfile, self._on_message, self._on_close, name="head").start()

    def report_ready(self, ranks):
        self.ready_sent_at = round(sim_clock.now(), 6)
        self.link.send({"type": "ready", "engines": self.topo.local_dp_ranks, "ranks": ranks})

    def leave(self):
        """This node stops (signal or the head's shutdown): say so and close."""
        self.leaving = True
        if self.link is not None:
            if not self.shutdown_by_head and not self.svc.failure:  # a failing node just drops the link
                self.link.send({"type": "bye"})
            self.link.close()

    # ---- what the head sends -----------------------------------------------------
    def _on_message(self, link, msg):
        kind = msg.get("type")
        svc = self.svc
        if kind in ("busy", "idle"):
            svc.wave(kind == "busy")
        elif kind == "request":
            threading.Thread(target=self._request, args=(link, msg), daemon=True).start()
        elif kind == "profile":
            threading.Thread(target=self._profile, args=(link, msg), daemon=True).start()
        elif kind == "deployment_ready":
            self.deployment_ready_at = round(sim_clock.now(), 6)
            svc.write_truth_soon()
        elif kind == "shutdown":
            self.shutdown_by_head = True
            svc.stop_event.set()

    def _request(self, link, msg):
        rec = self.svc.execute(msg.get("kind", "completion"), int(msg.get("prompt_tokens") or 1),
                               int(msg.get("completion_tokens") or 1), int(msg.get("dp_rank") or 0),
                               bool(msg.get("ok", True)))
        link.reply(msg, ok=rec["ok"], start=round(rec["t_start"], 6), end=round(rec["t_end"], 6),
                   node_rank=self.topo.node_rank, pid=os.getpid())

    def _profile(self, link, msg):
        code, text = self.svc.profile_local(msg.get("op") == "start", write=bool(msg.get("write")))
        link.reply(msg, code=code, error=text)

    def _on_close(self, _link):
        if self.leaving or self.shutdown_by_head:
            return
        self.svc.fail("RuntimeError: lost the connection to the data parallel head at tcp://%s:%d; "
                      "shutting down this node's engines" % (self.topo.address, self.port))

    def truth(self):
        return {"head": self.topo.handshake_uri(), "connected_to": self.connected_to, "join_attempts": self.attempts,
                "head_pid": self.head_pid, "joined_at": self.joined_at, "ready_at": self.ready_sent_at,
                "deployment_ready_at": self.deployment_ready_at}
