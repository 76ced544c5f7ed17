#include "broker/zap_protocol.h"

#include <zmq.h>

#include <cstdint>

#include <fmt/format.h>

namespace npuprof::broker {

namespace {
constexpr std::string_view kZapVersion = "1.0";
}  // namespace

Result<ZapRequest> ParseZapRequest(const std::vector<std::string>& frames) {
  if (frames.size() < 6)
    return Status::Invalid(fmt::format("a ZAP request has at least 6 frames, got {}", frames.size()));
  if (frames[0] != kZapVersion) return Status::Invalid("ZAP request: version is not 1.0");
  ZapRequest r;
  r.version = frames[0];
  r.request_id = frames[1];
  r.domain = frames[2];
  r.address = frames[3];
  r.routing_id = frames[4];
  r.mechanism = frames[5];
  if (frames.size() > 6) r.credential = frames[6];
  return r;
}

ZapVerdict DecideZap(const ZapRequest& req, const AllowList& allowed, std::string_view local_public_key,
                     std::string_view domain) {
  ZapVerdict v;
  v.status_code = "400";
  if (req.mechanism == "CURVE" && req.credential.size() == 32) {
    char z85[41] = {0};
    if (zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(req.credential.data()), 32)) v.public_key = z85;
  }
  if (req.domain != domain) {
    v.status_text = "unknown domain";
    return v;
  }
  if (req.mechanism != "CURVE") {
    v.status_text = "CURVE required";
    return v;
  }
  if (v.public_key.empty()) {
    v.status_text = "malformed CURVE credential";
    return v;
  }
  std::string name;
  if (!local_public_key.empty() && v.public_key == local_public_key) {
    name = std::string(kLocalPeerName);
  } else if (const AllowedPeer* p = allowed.FindKey(v.public_key)) {
    name = p->name;
  } else {
    v.status_text = "key not allowed";
    return v;
  }
  v.admitted = true;
  v.status_code = "200";
  v.status_text = "OK";
  v.user_id = name;
  return v;
}

std::vector<std::string> ZapReplyFrames(const ZapRequest& req, const ZapVerdict& v) {
  return {std::string(kZapVersion), req.request_id, v.status_code, v.status_text, v.admitted ? v.user_id : "", ""};
}

std::vector<std::string> ZapErrorReplyFrames(const std::vector<std::string>& frames, std::string_view why) {
  return {std::string(kZapVersion), frames.size() > 1 ? frames[1] : "", "500", std::string(why), "", ""};
}

}  // namespace npuprof::broker
