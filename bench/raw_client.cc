#include "bench/raw_client.h"

#include <optional>
#include <vector>

#include "common/socket_security.h"
#include "proto/wire.h"

namespace npuprof::bench {

RawClient::RawClient(const std::string& endpoint, const std::optional<CurveClientKeys>& keys)
    : sock_(ctx_, zmq::socket_type::dealer) {
  SetUpConnectingSocket(sock_, keys);
  sock_.set(zmq::sockopt::sndhwm, 0);  // pipelined batches: never drop or block a request
  sock_.set(zmq::sockopt::rcvhwm, 0);
  sock_.connect(endpoint);
}

void RawClient::Send(const std::string& verb, const nlohmann::json& args) {
  proto::ClientRequest req;
  req.set_verb(verb);
  req.set_args_json(args.dump());
  const std::string body = req.SerializeAsString();
  wire::SendFrames(sock_, {wire::kClientHeader, body});
}

proto::ClientResponse RawClient::Recv(std::chrono::milliseconds timeout) {
  proto::ClientResponse r;
  zmq::pollitem_t items[] = {{sock_.handle(), 0, ZMQ_POLLIN, 0}};
  zmq::poll(items, 1, timeout);
  if (!(items[0].revents & ZMQ_POLLIN)) {
    r.set_error("no answer from the broker within " + std::to_string(timeout.count()) + " ms");
    return r;
  }
  auto frames = wire::RecvFrames(sock_, false);
  if (!frames || frames->size() < 2 || !r.ParseFromString((*frames)[1])) {
    r = proto::ClientResponse();
    r.set_error("malformed answer from the broker");
  }
  return r;
}

proto::ClientResponse RawClient::Call(const std::string& verb, const nlohmann::json& args) {
  Send(verb, args);
  return Recv();
}

}  // namespace npuprof::bench
