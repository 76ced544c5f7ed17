#include "common/socket_security.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "common/allow_list.h"

namespace npuprof {

int64_t MaxMessageBytes() {
  static const int64_t cap = [] {
    const char* e = std::getenv("NPUPROF_MAX_MESSAGE_BYTES");
    if (!e || !*e) return kMaxMessageBytes;
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end == e || *end != '\0' || v <= 0) return kMaxMessageBytes;
    return std::min<int64_t>(v, kMaxMessageBytes);
  }();
  return cap;
}

std::string MessageCapText() {
  const int64_t cap = MaxMessageBytes();
  if (cap % (int64_t{1} << 20) == 0) return fmt::format("{} MiB", cap >> 20);
  return fmt::format("{} bytes", cap);
}

void CapInboundMessages(zmq::socket_t& sock) { sock.set(zmq::sockopt::maxmsgsize, MaxMessageBytes()); }

void SetUpConnectingSocket(zmq::socket_t& sock, const std::optional<CurveClientKeys>& keys) {
  CapInboundMessages(sock);
  sock.set(zmq::sockopt::linger, 0);
  sock.set(zmq::sockopt::reconnect_ivl, 100);
  sock.set(zmq::sockopt::reconnect_ivl_max, 5000);
  if (!keys) return;
  sock.set(zmq::sockopt::curve_serverkey, keys->server_public);
  sock.set(zmq::sockopt::curve_publickey, keys->own.public_key);
  sock.set(zmq::sockopt::curve_secretkey, keys->own.secret_key);
}

void SetUpCurveServer(zmq::socket_t& sock, const CurveKeyPair& server) {
  sock.set(zmq::sockopt::curve_server, true);
  sock.set(zmq::sockopt::curve_secretkey, server.secret_key);
  sock.set(zmq::sockopt::zap_domain, kZapDomain);
}

namespace {

std::string NextMonitorEndpoint() {
  static std::atomic<uint64_t> n{0};
  return fmt::format("inproc://npuprof-handshake-watch-{}-{}", ::getpid(), n.fetch_add(1));
}

constexpr int kWatchedEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                               ZMQ_EVENT_DISCONNECTED;

}  // namespace

HandshakeWatch::HandshakeWatch(zmq::context_t& ctx, zmq::socket_t& sock, std::optional<std::string> own_public_key)
    : pipe_(ctx, zmq::socket_type::pair), own_public_key_(std::move(own_public_key)) {
  const std::string ep = NextMonitorEndpoint();
  pipe_.set(zmq::sockopt::linger, 0);
  if (zmq_socket_monitor(sock.handle(), ep.c_str(), kWatchedEvents) == 0) pipe_.connect(ep);
}

HandshakeWatch::~HandshakeWatch() = default;

void* HandshakeWatch::handle() const { return const_cast<zmq::socket_t&>(pipe_).handle(); }

void HandshakeWatch::Drain() {
  for (;;) {
    zmq::message_t head;
    try {
      if (!pipe_.recv(head, zmq::recv_flags::dontwait)) return;
    } catch (const zmq::error_t&) {
      return;  // not connected (the monitor could not start): nothing to learn
    }
    bool more = head.more();
    while (more) {  // the endpoint frame: not needed
      zmq::message_t rest;
      if (!pipe_.recv(rest, zmq::recv_flags::dontwait)) break;
      more = rest.more();
    }
    if (head.size() < 6) continue;
    uint16_t event = 0;
    uint32_t value = 0;
    std::memcpy(&event, head.data(), sizeof(event));
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, sizeof(value));
    OnEvent(event, value);
  }
}

void HandshakeWatch::Refuse(std::string why) {
  if (refusal_ == why) return;
  refusal_ = std::move(why);
  refusal_taken_ = false;
}

std::optional<std::string> HandshakeWatch::TakeNewRefusal() {
  Drain();
  if (!refusal_ || refusal_taken_) return std::nullopt;
  refusal_taken_ = true;
  return refusal_;
}

void HandshakeWatch::OnEvent(uint16_t event, uint32_t value) {
  const bool curve = own_public_key_.has_value();
  switch (event) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
      connected_ = ever_connected_ = true;
      return;
    case ZMQ_EVENT_DISCONNECTED:
      if (connected_) ++drops_after_handshake_;
      connected_ = false;
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      Refuse(fmt::format(
          "the server refused this peer's key {} (ZAP status {}): it is not on the server's allow-list; the server's "
          "owner admits it with `{}`",
          own_public_key_.value_or("(none)"), value, AllowCommandFor("NAME", own_public_key_.value_or("KEY"))));
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      if (value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
        Refuse(curve ? std::string("this peer uses CURVE but the server does not on this endpoint (a server "
                                   "without a tcp listener uses none on its ipc socket)")
                     : std::string("the server requires CURVE on this endpoint: name this peer's key file and the "
                                   "server's public key (--key-file and --server-key, or NPUPROF_KEY_FILE and "
                                   "NPUPROF_SERVER_KEY; `npuprof keys` on the server prints its key)"));
        return;
      }
      [[fallthrough]];
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      // With CURVE and no handshake ever completed, the server closing the
      // connection mid-handshake means it could not read this peer's HELLO:
      // it was made for another server key.
      if (curve && !ever_connected_)
        Refuse("the CURVE handshake failed: the server key given (--server-key / NPUPROF_SERVER_KEY) is not this "
               "server's public key (`npuprof keys` on the server prints it)");
      connected_ = false;
      return;
    default:
      return;
  }
}

}  // namespace npuprof
