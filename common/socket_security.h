// How every npuprof ZeroMQ socket is secured (docs/SECURITY.md): the cap on
// inbound messages, CURVE on the server's listening socket and on the
// sockets that connect to it, and what a failed handshake tells the peer
// that connects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "common/curve_keys.h"

namespace npuprof {

// The largest message frame any npuprof socket accepts. A peer that sends a
// larger one is disconnected by libzmq and the frame is dropped; npuprof's
// own senders check before sending and report the size instead.
inline constexpr int64_t kMaxMessageBytes = int64_t{256} << 20;
// kMaxMessageBytes, or less when NPUPROF_MAX_MESSAGE_BYTES asks for less
// (tests use a small cap); never more.
int64_t MaxMessageBytes();
// "256 MiB" / "4096 bytes": the cap as people read it.
std::string MessageCapText();

// The ZAP domain of the server's CURVE socket.
inline constexpr const char* kZapDomain = "npuprof";

// Every npuprof socket: inbound frames over MaxMessageBytes() are refused.
void CapInboundMessages(zmq::socket_t& sock);
// A socket that connects to the broker (client, worker), before connect():
// the cap, linger 0, reconnects backing off from 100 ms to 5 s, and CURVE as
// a client when keys are given.
void SetUpConnectingSocket(zmq::socket_t& sock, const std::optional<CurveClientKeys>& keys);
// The broker's ROUTER, before it binds: a CURVE server with the ZAP domain.
void SetUpCurveServer(zmq::socket_t& sock, const CurveKeyPair& server);

// HandshakeWatch follows the handshakes of one connecting socket (a libzmq
// socket monitor) so that its owner can say why the server does not answer:
// a refused key or a security mismatch fail at once, instead of a timeout.
// Create it before the socket connects; it must not outlive ctx.
class HandshakeWatch {
 public:
  HandshakeWatch(zmq::context_t& ctx, zmq::socket_t& sock, std::optional<std::string> own_public_key);
  ~HandshakeWatch();
  HandshakeWatch(const HandshakeWatch&) = delete;
  HandshakeWatch& operator=(const HandshakeWatch&) = delete;

  // Reads the events that arrived, without waiting.
  void Drain();
  // The monitor pipe, to poll next to the socket (ZMQ_POLLIN).
  void* handle() const;
  // Why the server will not answer this socket, once that is certain: the
  // server refused this peer's key, or this peer and the server disagree on
  // security (CURVE on one side only, or the wrong server key). nullopt
  // while nothing definitive happened.
  const std::optional<std::string>& refusal() const { return refusal_; }
  // Drain(), then the refusal if it is new since the last call (for a log
  // line per refusal).
  std::optional<std::string> TakeNewRefusal();
  // How often a connection that had completed its handshake dropped (the
  // server stopped, or sent a frame over this socket's cap).
  uint64_t drops_after_handshake() const { return drops_after_handshake_; }

 private:
  void OnEvent(uint16_t event, uint32_t value);
  void Refuse(std::string why);

  zmq::socket_t pipe_;
  std::optional<std::string> own_public_key_;
  std::optional<std::string> refusal_;
  bool refusal_taken_ = false;
  bool connected_ = false;  // a handshake succeeded and no drop since
  bool ever_connected_ = false;
  uint64_t drops_after_handshake_ = 0;
};

}  // namespace npuprof
