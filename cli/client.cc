#include "cli/client.h"

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

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

Client::Client(const ServerAddress& addr) : endpoint_(ResolveEndpoint(addr)) {}

void Client::Reset() {
  sock_ = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  sock_->set(zmq::sockopt::linger, 0);
  sock_->connect(endpoint_);
}

Result<proto::ClientResponse> Client::Call(const std::string& verb, const json& args,
                                           std::chrono::milliseconds timeout) {
  if (endpoint_.rfind("ipc://", 0) == 0 && !std::filesystem::exists(endpoint_.substr(6)))
    return Status::Unavailable(fmt::format("no npuprof server at {} (start one with `npuprof server`)", endpoint_));
  if (!sock_) Reset();
  proto::ClientRequest req;
  req.set_verb(verb);
  req.set_args_json(args.dump());
  const std::string body = req.SerializeAsString();
  try {
    wire::SendFrames(*sock_, {wire::kClientHeader, body});
  } catch (const zmq::error_t& e) {
    Reset();
    return Status::Unavailable(fmt::format("cannot reach npuprof server at {}: {}", endpoint_, e.what()));
  }
  zmq::pollitem_t items[] = {{sock_->handle(), 0, ZMQ_POLLIN, 0}};
  zmq::poll(items, 1, timeout);
  if (!(items[0].revents & ZMQ_POLLIN)) {
    Reset();  // a late answer must not be read as the answer to the next request
    return Status::Unavailable(fmt::format("no npuprof server answered at {}", endpoint_));
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
  json body = json::parse(r->body_json(), nullptr, false);
  if (body.is_discarded()) return Status::Internal("server answered with invalid JSON");
  return body;
}

}  // namespace npuprof::cli
