"""Where one `vllm serve` sits in a data-parallel deployment, from its flags
(as vLLM reads them; README.md "Multi-node data parallel"):

  role      single     every DP rank here (data_parallel_size_local == data_parallel_size)
            head       start rank 0, fewer local ranks than the deployment: runs the API server and
                       waits for the other nodes' engines on ADDR:PORT
            headless   --headless: engines only, they join the head at ADDR:PORT
            secondary  a start rank without --headless (hybrid load balancing): engines that join
                       the head plus an API server of their own for them
  dp        data_parallel_size (global); dp_local: DP ranks on this node; start_rank: the
            first of them (global DP ranks start_rank .. start_rank + dp_local - 1)
  node_rank start_rank // dp_local
  address   --data-parallel-address (default 127.0.0.1), rpc_port --data-parallel-rpc-port
            (default 29550)

A simulated host owns one address (config network.address, default
127.0.0.1); "localhost" and 127.0.0.1 on it mean that address, as a
machine's loopback means the machine itself. So a head told to bind
127.0.0.1 listens on its own address, and a node told to reach the head at
127.0.0.1 reaches only itself: the deployment never forms, as on real
hardware."""
import ipaddress
import socket

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_RPC_PORT = 29550
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "ip6-localhost")
ANY_NAMES = ("0.0.0.0", "::", "*", "")


class TopologyError(ValueError):
    pass


class Topology:
    def __init__(self, args):
        self.tp = max(1, int(args.tensor_parallel_size or 1))
        self.dp = max(1, int(args.data_parallel_size or 1))
        self.headless = bool(getattr(args, "headless", False))
        # hybrid (or external) load balancing: every node's API server serves its own DP ranks
        self.hybrid = bool(getattr(args, "data_parallel_hybrid_lb", False) or
                           getattr(args, "data_parallel_external_lb", False))
        start = getattr(args, "data_parallel_start_rank", None)
        local = getattr(args, "data_parallel_size_local", None)
        self.start_rank = int(start or 0)
        if self.start_rank and not self.headless:
            self.hybrid = True  # vLLM infers hybrid load balancing from a start rank without --headless
        self.dp_local = int(local) if local is not None else (self.dp - self.start_rank)
        self.address = getattr(args, "data_parallel_address", None) or DEFAULT_ADDRESS
        self.rpc_port = int(getattr(args, "data_parallel_rpc_port", None) or DEFAULT_RPC_PORT)
        if self.headless and self.dp_local <= 0:
            raise TopologyError("RuntimeError: data_parallel_size_local must be > 0 in headless mode")
        if self.dp_local < 0 or self.start_rank < 0 or self.start_rank + self.dp_local > self.dp:
            raise TopologyError("ValueError: data_parallel_start_rank (%d) + data_parallel_size_local (%d) must "
                                "not exceed data_parallel_size (%d)" % (self.start_rank, self.dp_local, self.dp))
        if self.headless and self.hybrid:
            raise TopologyError("ValueError: data_parallel_hybrid_lb is not applicable in headless mode")
        if self.headless or self.start_rank > 0:
            self.role = "headless" if self.headless else "secondary"
        elif self.dp_local < self.dp:
            self.role = "head"
        else:
            self.role = "single"
        self.node_rank = self.start_rank // self.dp_local if self.dp_local else 0
        self.local_dp_ranks = list(range(self.start_rank, self.start_rank + self.dp_local))
        self.world = self.tp * self.dp
        self.local_world = self.tp * self.dp_local
        self.rank_offset = self.start_rank * self.tp

    @property
    def multinode(self):
        return self.role != "single"

    @property
    def serves_api(self):
        return self.role != "headless"

    def handshake_uri(self):
        return "tcp://%s:%d" % (self.address, self.rpc_port)

    def owns_dp_rank(self, d):
        return self.start_rank <= d < self.start_rank + self.dp_local

    def truth(self):
        return {"role": self.role, "node_rank": self.node_rank, "dp": self.dp, "dp_local": self.dp_local,
                "start_rank": self.start_rank, "local_dp_ranks": self.local_dp_ranks, "tp": self.tp,
                "world_size": self.world, "hybrid_lb": self.hybrid, "address": self.address,
                "rpc_port": self.rpc_port if self.multinode else None}


def resolve(address, own):
    """The address a connection to `address` from a host that owns `own` reaches."""
    a = (address or "").strip().lower()
    if a in LOOPBACK_NAMES:
        return own
    return address


def bind_address(address, own):
    """Where the head binds when told `address`; OSError (errno 99) when it is not its own,
    as binding a foreign address fails on a real machine."""
    a = (address or "").strip().lower()
    if a in ANY_NAMES or a in LOOPBACK_NAMES:
        return own
    if address != own and not is_loopback(address):
        try:  # a host name: fine when it names this host's address
            address = socket.gethostbyname(address)
        except OSError:
            pass
    if address != own:
        raise OSError(99, "Cannot assign requested address")
    return own


def is_loopback(address):
    try:
        return ipaddress.IPv4Address(address).is_loopback
    except ValueError:
        return False
