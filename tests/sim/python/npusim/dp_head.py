"""The head of a multi-node data-parallel deployment (node 0): listens on
ADDR:PORT for the other nodes' engines, checks their handshake as vLLM's
front end does, and carries the deployment's traffic to them: the request
wave (busy / idle), requests routed to their DP ranks, profiler start and
stop, the final shutdown. The API server answers only once every engine
reported ready (all_ready()); a node lost at any time fails the head
(README.md "Multi-node data parallel").

Engine states: local (the head's own), new (not connected), connected
(hello accepted), ready (its node reported its engines up), lost."""
import socket
import threading

from . import dp_link, dp_topology, sim_clock, sim_root


class Head:
    def __init__(self, svc):
        self.svc = svc
        self.topo = svc.topo
        self.lock = threading.Lock()
        self.engines = {d: ("local" if self.topo.owns_dp_rank(d) else "new") for d in range(self.topo.dp)}
        self.nodes = []          # one record per node that said hello (its link under "_link")
        self.fatal = None        # why the deployment cannot form (the head's start-up fails with it)
        self.closing = False
        self.announced_at = None
        self.bound = None
        self.sock = None
        self.timeout = float(sim_root.multinode(svc.cfg, "control_timeout_s"))

    # ---- listener and handshake ------------------------------------------------
    def bind(self):
        """Bind ADDR:PORT (OSError as a real bind fails: errno 98 in use, 99 not this host's address)."""
        host = dp_topology.bind_address(self.topo.address, self.svc.own_address)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, self.topo.rpc_port))
            s.listen(64)
        except OSError:
            s.close()
            raise
        s.settimeout(0.2)
        self.sock = s
        self.bound = "%s:%d" % (host, self.topo.rpc_port)
        threading.Thread(target=self._accept_loop, name="dp-head-accept", daemon=True).start()

    def _accept_loop(self):
        while not self.closing:
            try:
                conn, peer = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._handshake, args=(conn, peer), daemon=True).start()

    def _refuse(self, hello):
        """The reason vLLM's front end would refuse this hello (None: accept). Any of them ends the
        head's start-up, as the real check raises in the front end."""
        engines = hello.get("engines") or []
        for d in engines:
            if not isinstance(d, int) or self.engines.get(d) != "new":
                return "RuntimeError: Message from engine with unexpected data parallel rank: %s" % d
        headless = bool(hello.get("headless"))
        if headless == self.topo.hybrid and engines:
            if headless:
                return ("RuntimeError: Remote engine %d must not use --headless in external or hybrid dp lb mode"
                        % engines[0])
            return "RuntimeError: Remote engine %d must use --headless unless in external or hybrid dp lb mode" \
                % engines[0]
        if hello.get("tp") != self.topo.tp or hello.get("dp") != self.topo.dp:
            return ("RuntimeError: Configuration mismatch detected for engine %d. All DP workers must have identical "
                    "configurations (tensor_parallel_size %s vs %d, data_parallel_size %s vs %d). Please ensure "
                    "all workers are started with the same command-line arguments."
                    % (engines[0] if engines else -1, hello.get("tp"), self.topo.tp, hello.get("dp"), self.topo.dp))
        return None

    def _handshake(self, conn, peer):
        conn.settimeout(self.timeout)
        rfile = conn.makefile("rb")
        try:
            hello = dp_link.read_message(rfile)
        except OSError:
            hello = None
        if not hello or hello.get("type") != "hello":
            conn.close()
            return
        with self.lock:
            late = self.announced_at is not None or self.closing
            why = "RuntimeError: the deployment is already serving; engines cannot join it now" if late \
                else self._refuse(hello)
            if why is None:
                node = {"node_rank": hello.get("node_rank"), "start_rank": hello.get("start_rank"),
                        "dp_local": hello.get("dp_local"), "engines": list(hello.get("engines") or []),
                        "headless": bool(hello.get("headless")), "hostname": hello.get("hostname"),
                        "address": hello.get("address"), "peer": "%s:%d" % peer, "pid": hello.get("pid"),
                        "instance": hello.get("instance"), "clock_offset_s": hello.get("clock_offset_s"),
                        "joined_at": round(sim_clock.now(), 6), "ready_at": None, "left_at": None,
                        "left": None, "ranks": []}
                for d in node["engines"]:
                    self.engines[d] = "connected"
                self.nodes.append(node)
            elif not late and self.fatal is None:
                self.fatal = why
        if why is not None:
            try:
                conn.sendall(dp_link.encode({"type": "reject", "error": why}))
            except OSError:
                pass
            conn.close()
            return
        for d in node["engines"]:
            self.svc.api_log.debug("utils.py:958", "HELLO from remote core engine process %d." % d)
        link = dp_link.Link(conn, rfile, self._on_message, self._on_close, name="node%s" % node["node_rank"])
        node["_link"] = link
        link.node = node
        link.send({"type": "welcome", "dp": self.topo.dp, "tp": self.topo.tp, "head_pid": self.svc.pid,
                   "hybrid_lb": self.topo.hybrid})
        link.start()
        self.svc.write_truth_soon()

    def _on_message(self, link, msg):
        node = link.node
        kind = msg.get("type")
        if kind == "ready":
            with self.lock:
                node["ranks"] = msg.get("ranks") or []
                node["ready_at"] = round(sim_clock.now(), 6)
                for d in node["engines"]:
                    self.engines[d] = "ready"
            for d in node["engines"]:
                self.svc.api_log.debug("utils.py:958", "READY from remote core engine process %d." % d)
            self.svc.write_truth_soon()
        elif kind == "bye":
            node["left"] = "stopped"

    def _on_close(self, link):
        node = link.node
        with self.lock:
            node["left_at"] = round(sim_clock.now(), 6)
            if self.closing:
                node["left"] = node["left"] or "shutdown"
                return
            node["left"] = node["left"] or "lost"
            for d in node["engines"]:
                self.engines[d] = "lost"
            if self.announced_at is None and self.fatal is None:
                self.fatal = ("RuntimeError: Engine core initialization failed. See root cause above. Failed core "
                              "proc(s): {%s}" % ", ".join("'EngineCore_DP%d': 1" % d for d in node["engines"]))
        self.svc.node_lost(node)

    # ---- state -----------------------------------------------------------------
    def pending(self):
        """(engines not connected, engines connected but not ready) among the remote ones."""
        with self.lock:
            states = list(self.engines.values())
        return states.count("new"), states.count("connected")

    def all_ready(self):
        with self.lock:
            return all(s in ("local", "ready") for s in self.engines.values())

    def announce_ready(self):
        """The API server answers: tell every node (secondary API servers start serving now)."""
        with self.lock:
            self.announced_at = round(sim_clock.now(), 6)
        self.broadcast({"type": "deployment_ready"})

    def _node_of(self, dp_rank):
        with self.lock:
            for n in self.nodes:
                if dp_rank in n["engines"]:
                    return n
        return None

    def broadcast(self, msg):
        with self.lock:
            links = [n["_link"] for n in self.nodes if "_link" in n]
        for link in links:
            link.send(msg)

    def forward_request(self, dp_rank, fields, timeout):
        """Run one request on the remote DP rank; the node's answer or None (node gone)."""
        node = self._node_of(dp_rank)
        if node is None:
            return None
        return node["_link"].call(dict(fields, type="request", dp_rank=dp_rank), timeout)

    def profile_all(self, op, write=False):
        """/start_profile or /stop_profile on every node at once -> (code, message): 200 when every
        node answered 200, else the first failure."""
        with self.lock:
            links = [n["_link"] for n in self.nodes if "_link" in n]
        answers = [None] * len(links)

        def one(i, link):
            answers[i] = link.call({"type": "profile", "op": op, "write": bool(write)}, self.timeout)
        threads = [threading.Thread(target=one, args=(i, lk), daemon=True) for i, lk in enumerate(links)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.timeout + 1)
        for link, a in zip(links, answers):
            if a is None:
                return 500, "EngineDeadError: engine core of node %s did not answer %s_profile" \
                    % (link.node["node_rank"], op)
            if a.get("code") != 200:
                return a.get("code") or 500, a.get("error") or "profiler failed on node %s" % link.node["node_rank"]
        return 200, ""

    def shutdown(self, wait_s=10.0):
        """Tell every node to stop, then wait (bounded) until their links close."""
        with self.lock:
            self.closing = True
            links = [n["_link"] for n in self.nodes if "_link" in n]
        for link in links:
            link.send({"type": "shutdown"})
        deadline = sim_clock.now() + wait_s
        for link in links:
            link.closed.wait(max(0.0, deadline - sim_clock.now()))
            link.close()
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass

    def truth(self):
        with self.lock:
            return {"bound": self.bound, "engines": {str(d): s for d, s in sorted(self.engines.items())},
                    "deployment_ready_at": self.announced_at,
                    "nodes": [{k: v for k, v in n.items() if not k.startswith("_")} for n in self.nodes]}
