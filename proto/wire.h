// The wire protocol, written down once for broker, workers and clients
// (after the ZeroMQ guide's Majordomo: one ROUTER socket, a header frame
// telling clients from workers).
//
//   client -> broker : [ "NPC1", ClientRequest ]        (client is a DEALER)
//   broker -> client : [ "NPC1", ClientResponse ]
//   worker -> broker : [ "NPW1", WorkerToBroker ]       (worker is a DEALER)
//   broker -> worker : [ "NPW1", BrokerToWorker ]
// On the broker's ROUTER every message is prefixed by the peer identity frame.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

namespace npuprof::wire {

inline constexpr std::string_view kClientHeader = "NPC1";
inline constexpr std::string_view kWorkerHeader = "NPW1";

// Heartbeats: every kHeartbeatMs both ways; a peer silent for
// kHeartbeatLiveness intervals is dead.
inline constexpr int kHeartbeatMs = 1000;
inline constexpr int kHeartbeatLiveness = 3;

inline void SendFrames(zmq::socket_t& sock, const std::vector<std::string_view>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    zmq::const_buffer buf(frames[i].data(), frames[i].size());
    sock.send(buf, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::dontwait);
  }
}

// Receives one multipart message (non-blocking when dontwait). Empty optional when none.
inline std::optional<std::vector<std::string>> RecvFrames(zmq::socket_t& sock, bool dontwait) {
  std::vector<zmq::message_t> parts;
  zmq::message_t msg;
  auto r = sock.recv(msg, dontwait ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
  if (!r) return std::nullopt;
  std::vector<std::string> out;
  out.emplace_back(static_cast<const char*>(msg.data()), msg.size());
  while (msg.more()) {
    zmq::message_t next;
    (void)sock.recv(next, zmq::recv_flags::none);
    out.emplace_back(static_cast<const char*>(next.data()), next.size());
    msg.swap(next);
  }
  return out;
}

// Default endpoint of a server whose data dir is dir.
inline std::string IpcEndpointFor(const std::string& data_dir) { return "ipc://" + data_dir + "/npuprof.sock"; }

}  // namespace npuprof::wire
