// The ZAP exchange (ZeroMQ RFC 27, version 1.0) as data, and npuprof's rule
// for it. Pure: zap_authenticator.cc does the socket work.
//
// Request frames (after the REP envelope): version "1.0", request id,
// domain, address, routing id, mechanism, credentials (for CURVE: the
// peer's 32-byte public key). Reply: version, request id, status code
// ("200" admitted, "400" refused, "500" internal error), status text,
// user id, metadata (empty).
//
// The rule: a CURVE peer in the npuprof domain whose public key is the
// server's local key or on the allow-list is admitted, with its name as
// user id; every other request is refused.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/allow_list.h"
#include "common/status.h"

namespace npuprof::broker {

struct ZapRequest {
  std::string version, request_id, domain, address, routing_id, mechanism;
  std::string credential;  // the first credential frame (raw bytes)
};
// kInvalidArgument when frames are not a ZAP 1.0 request.
Result<ZapRequest> ParseZapRequest(const std::vector<std::string>& frames);

struct ZapVerdict {
  bool admitted = false;
  std::string status_code;  // "200" / "400" / "500"
  std::string status_text;
  std::string user_id;      // the peer's name when admitted
  std::string public_key;   // Z85 of the CURVE credential ("" when none)
};
ZapVerdict DecideZap(const ZapRequest& req, const AllowList& allowed, std::string_view local_public_key,
                     std::string_view domain);

// The reply frames for req.
std::vector<std::string> ZapReplyFrames(const ZapRequest& req, const ZapVerdict& v);
// The reply to frames that are not a request: 500 with whatever request id there is.
std::vector<std::string> ZapErrorReplyFrames(const std::vector<std::string>& frames, std::string_view why);

}  // namespace npuprof::broker
