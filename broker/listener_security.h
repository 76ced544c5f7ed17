// Who may reach the broker's ROUTER socket (docs/SECURITY.md), set up
// before it binds:
//  * the data dir holding the ipc socket is private (0700, owned by the
//    server's user; see EnsurePrivateDir for what is refused);
//  * as soon as one endpoint is not the data dir's own ipc socket (e.g.
//    --listen tcp://...), the socket is a CURVE server with a ZAP handler
//    (ZapAuthenticator) on every endpoint — a security mechanism is per
//    socket, so the ipc socket then uses CURVE too, and local peers use the
//    data dir's local key;
//  * listen.json in the data dir says which it is, so that local peers
//    (workers forked by the server, clients naming --data-dir) find out
//    without flags.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "broker/zap_authenticator.h"
#include "common/status.h"

namespace npuprof::broker {

enum class ListenerSecurity {
  kCurveBeyondIpc,  // the product: CURVE + ZAP once any endpoint is not the private ipc socket
  kNone,            // never CURVE: the benchmarks' plain-tcp baseline only
};

// Makes data_dir private (created 0700; a group/world-readable one owned by
// this user is tightened, logged; a writable or foreign one refused).
Status PrepareDataDir(const std::string& data_dir);

// Sets router up for endpoints (the data dir's ipc socket included) and
// writes listen.json. Returns the running ZAP handler when CURVE is on
// (keep it until the router is closed), nullptr when not.
Result<std::unique_ptr<ZapAuthenticator>> SecureListener(zmq::context_t& ctx, zmq::socket_t& router,
                                                         const std::string& data_dir,
                                                         const std::vector<std::string>& endpoints,
                                                         ListenerSecurity mode);

}  // namespace npuprof::broker
