#include "cli/client.h"

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "common/json_depth.h"
#include "common/private_files.h"
#include "common/server_keys.h"
#include "proto/wire.h"

namespace npuprof::cli {

std::string DefaultDataDir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/npuprof";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/state/npuprof";
}

std::string ResolveDataDir(const std::string& flag) {
  if (!flag.empty()) return std::filesystem::absolute(flag).lexically_normal().string();
  if (const char* e = std::getenv("NPUPROF_DATA_DIR"); e && *e)
    return std::filesystem::absolute(e).lexically_normal().string();
  return DefaultDataDir();
}

std::string ResolveEndpoint(const ServerAddress& addr) {
  if (!addr.broker.empty()) return addr.broker;
  if (addr.data_dir.empty()) {
    if (const char* e = std::getenv("NPUPROF_BROKER"); e && *e) return e;
  }
  return wire::IpcEndpointFor(ResolveDataDir(addr.data_dir));
}

namespace {

std::string FlagOrEnv(const std::string& flag, const char* env) {
  if (!flag.empty()) return flag;
  const char* e = std::getenv(env);
  return e && *e ? e : "";
}

// --server-key's value: a Z85 key, or a file holding one (a public-key file
// or a key file: only its public key is used).
Result<std::string> ServerPublicKey(const std::string& value) {
  if (ValidateZ85Key(value, "--server-key").ok()) return value;
  if (!std::filesystem::exists(value))
    return Status::Invalid(fmt::format("--server-key: '{}' is neither a CURVE public key (40 Z85 characters) nor a "
                                       "file (`npuprof keys` on the server prints its key)",
                                       value.substr(0, 80)));
  auto text = ReadProtectedFile(value, kMaxKeyFileBytes);
  if (!text.ok()) return Status(text.status().code(), "--server-key: " + text.status().message());
  auto pair = ParseKeyFile(*text, value, /*require_secret=*/false);
  if (!pair.ok()) return Status(pair.status().code(), "--server-key: " + pair.status().message());
  return pair->public_key;
}

}  // namespace

Result<std::optional<CurveClientKeys>> ResolvePeerKeys(const ServerAddress& addr, const std::string& endpoint) {
  const std::string key_file = FlagOrEnv(addr.key_file, "NPUPROF_KEY_FILE");
  const std::string server_key = FlagOrEnv(addr.server_key, "NPUPROF_SERVER_KEY");
  if (!key_file.empty() || !server_key.empty()) {
    if (key_file.empty())
      return Status::Invalid("--server-key needs --key-file (this peer's own key pair: `npuprof keys new --out FILE`)");
    if (server_key.empty())
      return Status::Invalid("--key-file needs --server-key (the server's public key: `npuprof keys` on the server "
                             "prints it)");
    auto text = ReadSecretFile(key_file, kMaxKeyFileBytes);
    if (!text.ok()) return Status(text.status().code(), "--key-file: " + text.status().message());
    auto own = ParseKeyFile(*text, key_file, /*require_secret=*/true);
    if (!own.ok()) return Status(own.status().code(), "--key-file: " + own.status().message());
    auto server = ServerPublicKey(server_key);
    if (!server.ok()) return server.status();
    return std::optional<CurveClientKeys>(CurveClientKeys{*server, *own});
  }
  if (auto dir = DataDirOfIpcEndpoint(endpoint)) return LocalPeerKeys(*dir);
  return std::optional<CurveClientKeys>();
}

Client::Client(const ServerAddress& addr) : addr_(addr), endpoint_(ResolveEndpoint(addr)) {}

void Client::Drop() {
  watch_.reset();
  sock_.reset();
}

bool Client::Reset() {
  Drop();
  keys_ = ResolvePeerKeys(addr_, endpoint_);
  if (!keys_.ok()) return false;
  sock_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  SetUpConnectingSocket(*sock_, *keys_);
  watch_ = std::make_unique<HandshakeWatch>(
      ctx_, *sock_, *keys_ ? std::optional<std::string>((*keys_)->own.public_key) : std::nullopt);
  sock_->connect(endpoint_);
  return true;
}

Result<proto::ClientResponse> Client::Call(const std::string& verb, const json& args,
                                           std::chrono::milliseconds timeout) {
  if (endpoint_.rfind("ipc://", 0) == 0 && !std::filesystem::exists(endpoint_.substr(6)))
    return Status::Unavailable(fmt::format("no npuprof server at {} (start one with `npuprof server`)", endpoint_));
  proto::ClientRequest req;
  req.set_verb(verb);
  req.set_args_json(args.dump(-1, ' ', false, json::error_handler_t::replace));
  const std::string body = req.SerializeAsString();
  if (static_cast<int64_t>(body.size()) > MaxMessageBytes())
    return Status::Invalid(fmt::format("the {} request is {} bytes, over the {} message cap of npuprof's sockets "
                                       "(the server would drop it)",
                                       verb, body.size(), MessageCapText()));
  if (!sock_ && !Reset()) return keys_.status();
  watch_->Drain();
  if (watch_->refusal()) {
    Status refused = Status::Denied(fmt::format("{}: {}", endpoint_, *watch_->refusal()));
    Drop();
    return refused;
  }
  const uint64_t drops_before = watch_->drops_after_handshake();
  try {
    wire::SendFrames(*sock_, {wire::kClientHeader, body});
  } catch (const zmq::error_t& e) {
    Drop();
    return Status::Unavailable(fmt::format("cannot reach npuprof server at {}: {}", endpoint_, e.what()));
  }
  // Wait for the answer, or for a handshake failure that means none will come.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool answered = false;
  while (!answered) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    zmq::pollitem_t items[] = {{sock_->handle(), 0, ZMQ_POLLIN, 0}, {watch_->handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, left);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;  // a signal: wait on until the deadline
      Drop();
      return Status::Unavailable(fmt::format("waiting for npuprof server at {}: {}", endpoint_, e.what()));
    }
    answered = items[0].revents & ZMQ_POLLIN;
    if (items[1].revents & ZMQ_POLLIN) watch_->Drain();
    if (!answered && watch_->refusal()) {
      Status refused = Status::Denied(fmt::format("{}: {}", endpoint_, *watch_->refusal()));
      Drop();
      return refused;
    }
  }
  if (!answered) {
    const bool dropped = watch_->drops_after_handshake() != drops_before;
    Drop();  // a late answer must not be read as the answer to the next request
    return Status::Unavailable(fmt::format(
        "no npuprof server answered at {}{}", endpoint_,
        dropped ? fmt::format(" (the connection dropped while waiting: the server stopped, or its answer was over "
                              "the {} message cap)",
                              MessageCapText())
                : ""));
  }
  auto frames = wire::RecvFrames(*sock_, false);
  proto::ClientResponse resp;
  if (!frames || frames->size() < 2 || !resp.ParseFromString((*frames)[1]))
    return Status::Internal("malformed answer from server");
  return resp;
}

Result<json> Client::CallJson(const std::string& verb, const json& args, std::chrono::milliseconds timeout) {
  auto r = Call(verb, args, timeout);
  if (!r.ok()) return r.status();
  if (!r->ok()) return Status::Invalid(r->error());
  // The server's answer is read like any JSON from outside (common/json_depth.h).
  Result<json> body = ParseJson(r->body_json(), kMaxOwnJsonDepth);
  if (!body.ok()) return Status::Internal("the server's answer cannot be read: " + body.status().message());
  return body;
}

}  // namespace npuprof::cli
