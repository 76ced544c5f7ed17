// The endpoints `npuprof server --listen` takes, checked before anything
// binds (like --metrics-listen's HOST:PORT, broker/metrics_http_request.h).
// libzmq itself takes more than the server can serve: a tcp port above
// 65535 is wrapped into another port, a wildcard port binds one the server
// never learns, and inproc:// is reachable only from inside the server's
// own process. Each would be written to listen.json and the log as if it
// were listened on.
//
// Accepted:
//   tcp://HOST:PORT  HOST a name, an IPv4 address, [IPv6] or * (every
//                    interface); PORT a decimal 1..65535;
//   ipc://PATH       a socket file (at most 107 bytes, the kernel's limit),
//                    or @NAME in the abstract namespace.
// Anything else is InvalidArgument naming the endpoint, what is wrong and
// the forms above. Pure: no I/O.
#pragma once

#include <string_view>

#include "common/status.h"

namespace npuprof::broker {

Status CheckListenEndpoint(std::string_view endpoint);

}  // namespace npuprof::broker
