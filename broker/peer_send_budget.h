// PeerSendBudget: a bound in bytes on what the broker has handed ZeroMQ for
// one peer and ZeroMQ has not yet written to that peer's connection.
//
// ZeroMQ bounds a peer's outgoing queue in messages only (the router's
// high-water mark, 100,000), whatever their size: a client that sends
// requests and never reads the replies (20,000 `events --json` of one run)
// grew the server by 750 MB. Each message body here is handed to ZeroMQ
// without a copy, with a free callback that ZeroMQ calls once it has written
// the bytes out (or dropped them: an unknown or vanished peer); the callback
// subtracts them from that peer's count. A message for a peer whose count
// would pass the cap is not sent, and the log says so once per episode
// (and again when the peer reads and comes back under it). A peer with
// nothing queued always gets its next message, however large, so one big
// answer still goes through. The cap holds per peer; every peer has its own.
//
// Send runs on the broker's loop thread; the callbacks run on ZeroMQ's I/O
// thread (the counts are atomics shared with the messages in flight).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include <zmq.hpp>

namespace npuprof::broker {

// A peer's routing id for logs: it is bytes; at most 48 of them, the
// unprintable ones as \xNN.
std::string PeerName(const std::string& identity);

// The cap per peer: docs/RELIABILITY.md ("Bounded memory per peer").
inline constexpr uint64_t kPeerSendCapBytes = uint64_t{64} << 20;

class PeerSendBudget {
 public:
  explicit PeerSendBudget(uint64_t cap_bytes = kPeerSendCapBytes) : cap_(cap_bytes) {}

  // Sends [identity, header, body] on router (body without a copy), unless
  // the peer is over its cap: then nothing is sent and false is returned.
  // what names the peer in the log ("client", "worker"). Throws what
  // zmq::socket_t::send throws.
  bool Send(zmq::socket_t& router, const std::string& identity, std::string_view header, std::string body,
            std::string_view what);

  // Bytes handed to ZeroMQ for identity and not yet written out.
  uint64_t Queued(const std::string& identity) const;

 private:
  struct Peer {
    std::shared_ptr<std::atomic<uint64_t>> queued = std::make_shared<std::atomic<uint64_t>>(0);
    bool over = false;      // in an episode of dropped messages (logged once)
    uint64_t dropped = 0;   // messages dropped in this episode
  };
  void Prune();

  uint64_t cap_;
  std::unordered_map<std::string, Peer> peers_;
  uint64_t sends_ = 0;
};

}  // namespace npuprof::broker
