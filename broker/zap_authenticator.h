// ZapAuthenticator: the ZAP handler of the broker's CURVE socket, on its own
// thread, and the log of the peers the listener refuses (docs/SECURITY.md).
//
// Contract:
//  * Start() binds inproc://zeromq.zap.01 in the broker's context before it
//    returns. The broker binds its ROUTER only after that: libzmq admits
//    every CURVE key when no handler is bound, so no handshake may happen
//    without it. The handler's socket stays open until the destructor, so
//    destroy the authenticator only after the ROUTER is closed.
//  * Every request is answered (zap_protocol.h): admitted are the local key
//    and the keys on the data dir's allow-list; everything else is refused,
//    and logged with the key and the peer's address (RefusalLog: once per
//    peer per minute, with the count of refusals since).
//  * The allow-list is re-read when its file changed (a stat per request),
//    so `npuprof keys allow|remove` applies from the next connection on,
//    without a restart. A list that cannot be read or parsed admits only the
//    local key until it is fixed (logged).
//  * Handshakes libzmq ends before asking the handler (a peer without a
//    key, a peer holding another server key) are logged from a monitor of
//    the ROUTER; libzmq 4.3 does not tell their address, only the endpoint.
//  * Never throws out of its thread; the counters are for tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "common/status.h"

namespace npuprof::broker {

class ZapAuthenticator {
 public:
  struct Options {
    std::string data_dir;          // holds the allow-list (common/server_keys.h)
    std::string local_public_key;  // always admitted
  };
  // monitored: the ROUTER whose handshakes are logged (not yet bound).
  static Result<std::unique_ptr<ZapAuthenticator>> Start(zmq::context_t& ctx, zmq::socket_t& monitored,
                                                         Options opts);
  ~ZapAuthenticator();
  ZapAuthenticator(const ZapAuthenticator&) = delete;
  ZapAuthenticator& operator=(const ZapAuthenticator&) = delete;

  uint64_t admitted() const { return admitted_.load(); }
  uint64_t refused() const { return refused_.load(); }

 private:
  ZapAuthenticator(zmq::context_t& ctx, Options opts);
  void Loop();

  Options opts_;
  zmq::socket_t handler_;  // REP at inproc://zeromq.zap.01
  zmq::socket_t monitor_;  // PAIR: the ROUTER's handshake events
  zmq::socket_t wake_rx_;  // PAIR: the destructor's stop signal
  zmq::socket_t wake_tx_;
  std::atomic<uint64_t> admitted_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace npuprof::broker
