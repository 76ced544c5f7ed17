#include "broker/peer_send_budget.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace npuprof::broker {
namespace {

// One message body in ZeroMQ's hands, with the count it is charged to.
struct Held {
  std::string data;
  std::shared_ptr<std::atomic<uint64_t>> queued;
};

void FreeHeld(void* /*data*/, void* hint) {
  Held* held = static_cast<Held*>(hint);
  held->queued->fetch_sub(held->data.size(), std::memory_order_relaxed);
  delete held;
}

}  // namespace

std::string PeerName(const std::string& identity) {
  std::string out;
  for (unsigned char c : identity.substr(0, 48))
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  return out;
}

bool PeerSendBudget::Send(zmq::socket_t& router, const std::string& identity, std::string_view header,
                          std::string body, std::string_view what) {
  if (++sends_ % 1024 == 0) Prune();
  Peer& peer = peers_[identity];
  const uint64_t queued = peer.queued->load(std::memory_order_relaxed);
  if (queued > 0 && queued + body.size() > cap_) {
    if (!peer.over)
      spdlog::warn("{} {} has {} MB of messages it has not read (the cap is {} MB per peer): what the broker sends "
                   "it is dropped until it reads",
                   what, PeerName(identity), queued >> 20, cap_ >> 20);
    peer.over = true;
    ++peer.dropped;
    return false;
  }
  if (peer.over) {
    spdlog::info("{} {} reads again; {} message(s) to it were dropped", what, PeerName(identity), peer.dropped);
    peer.over = false;
    peer.dropped = 0;
  }
  auto held = std::make_unique<Held>(Held{std::move(body), peer.queued});
  zmq::message_t msg(held->data.data(), held->data.size(), &FreeHeld, held.get());
  // From here ZeroMQ owns held: the message frees it when written, dropped
  // or destroyed (also if a send below throws).
  held->queued->fetch_add(held->data.size(), std::memory_order_relaxed);
  held.release();
  router.send(zmq::const_buffer(identity.data(), identity.size()), zmq::send_flags::sndmore);
  router.send(zmq::const_buffer(header.data(), header.size()), zmq::send_flags::sndmore);
  router.send(msg, zmq::send_flags::dontwait);
  return true;
}

uint64_t PeerSendBudget::Queued(const std::string& identity) const {
  auto it = peers_.find(identity);
  return it == peers_.end() ? 0 : it->second.queued->load(std::memory_order_relaxed);
}

void PeerSendBudget::Prune() {
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (!it->second.over && it->second.queued->load(std::memory_order_relaxed) == 0) it = peers_.erase(it);
    else ++it;
  }
}

}  // namespace npuprof::broker
