// Client: how every client verb reaches a server. The endpoint comes from
// --broker, else NPUPROF_BROKER, else the socket inside --data-dir /
// NPUPROF_DATA_DIR / the user's default data dir.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/status.h"
#include "npuprof.pb.h"

namespace npuprof::cli {

using json = nlohmann::json;

struct ServerAddress {
  std::string data_dir;  // flag value ("" = not given)
  std::string broker;    // flag value ("" = not given)
};

// ~/.local/state/npuprof (or $XDG_STATE_HOME/npuprof).
std::string DefaultDataDir();
// --data-dir, else NPUPROF_DATA_DIR, else DefaultDataDir().
std::string ResolveDataDir(const std::string& flag);
// The endpoint a client connects to, and a description for messages.
std::string ResolveEndpoint(const ServerAddress& addr);

class Client {
 public:
  explicit Client(const ServerAddress& addr);
  // Sends one request; waits up to timeout for the answer.
  // kUnavailable when no server answers.
  Result<proto::ClientResponse> Call(const std::string& verb, const json& args,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Call() that turns a failed response into a Status (message = server's error).
  Result<json> CallJson(const std::string& verb, const json& args,
                        std::chrono::milliseconds timeout = std::chrono::seconds(10));
  const std::string& endpoint() const { return endpoint_; }

 private:
  void Reset();
  std::string endpoint_;
  zmq::context_t ctx_{1};
  std::unique_ptr<zmq::socket_t> sock_;
};

}  // namespace npuprof::cli
