// RawClient: a bare DEALER client of the broker's wire protocol
// (proto/wire.h), for benchmarks and tests that drive a broker in-process.
// Unlike cli::Client (one request at a time), requests may be pipelined:
// each reply comes back when its request is answered — at once, or after the
// commit a deferred answer waits for.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "npuprof.pb.h"

namespace npuprof::bench {

class RawClient {
 public:
  // keys: CURVE keys for a broker that requires them (none = plain).
  explicit RawClient(const std::string& endpoint, const std::optional<CurveClientKeys>& keys = std::nullopt);
  void Send(const std::string& verb, const nlohmann::json& args);
  // The next reply; a failed response saying so when none arrives within
  // timeout or it cannot be parsed.
  proto::ClientResponse Recv(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Send, then Recv.
  proto::ClientResponse Call(const std::string& verb, const nlohmann::json& args);

 private:
  zmq::context_t ctx_{1};
  zmq::socket_t sock_;
};

}  // namespace npuprof::bench
