// Client: how every client verb reaches a server. The endpoint comes from
// --broker, else NPUPROF_BROKER, else the socket inside --data-dir /
// NPUPROF_DATA_DIR / the user's default data dir. The CURVE keys, when the
// server needs them, from ResolvePeerKeys (docs/SECURITY.md).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/curve_keys.h"
#include "common/socket_security.h"
#include "common/status.h"
#include "npuprof.pb.h"

namespace npuprof::cli {

using json = nlohmann::json;

struct ServerAddress {
  std::string data_dir;    // flag value ("" = not given)
  std::string broker;      // flag value ("" = not given)
  std::string key_file;    // --key-file: this peer's key pair ("" = NPUPROF_KEY_FILE)
  std::string server_key;  // --server-key: Z85 or a file holding it ("" = NPUPROF_SERVER_KEY)
};

// ~/.local/state/npuprof (or $XDG_STATE_HOME/npuprof).
std::string DefaultDataDir();
// --data-dir, else NPUPROF_DATA_DIR, else DefaultDataDir().
std::string ResolveDataDir(const std::string& flag);
// The endpoint a client connects to, and a description for messages.
std::string ResolveEndpoint(const ServerAddress& addr);
// The CURVE keys a client or worker uses to reach endpoint:
//  1. --key-file / NPUPROF_KEY_FILE (a key pair, mode 0600) together with
//     --server-key / NPUPROF_SERVER_KEY (the server's public key, Z85, or a
//     file holding it such as the server's curve/server.pub); one without
//     the other is an error;
//  2. else, for the ipc socket of a data dir: that dir's local key when its
//     server uses CURVE (listen.json), none when it does not;
//  3. else none (plain ZeroMQ: a CURVE server refuses it, clearly).
Result<std::optional<CurveClientKeys>> ResolvePeerKeys(const ServerAddress& addr, const std::string& endpoint);

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
  // A new socket (keys resolved again: a restarted server may have changed
  // listen.json); false with keys_ holding the error when they cannot be.
  bool Reset();
  // Forgets the socket (the next Call makes a new one).
  void Drop();
  ServerAddress addr_;
  std::string endpoint_;
  Result<std::optional<CurveClientKeys>> keys_{std::optional<CurveClientKeys>()};
  zmq::context_t ctx_{1};
  std::unique_ptr<zmq::socket_t> sock_;
  std::unique_ptr<HandshakeWatch> watch_;  // destroyed before sock_
};

}  // namespace npuprof::cli
