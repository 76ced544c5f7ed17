// The little HTTP/1.1 the metrics responder speaks (broker/metrics_http.h).
// Pure: bytes in, decisions and bytes out; no I/O.
//
//   GET /metrics (any query string)  -> 200, text/plain; version=0.0.4
//   another method on /metrics       -> 405 Method Not Allowed, Allow: GET
//   any other path                   -> 404
//   a request head that is not HTTP  -> 400
//   a head longer than the cap       -> 431
// Every response says `Connection: close`: one request per connection.
// The head is the request line and the header lines up to the empty line;
// the headers' contents are not used (a GET has no body to frame).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace npuprof::metrics {

// "HOST:PORT", "[IPV6]:PORT" or ":PORT" (= 127.0.0.1); PORT 0..65535 (0 =
// any free port). Errors name the expected form.
struct ListenAddress {
  std::string host;
  uint16_t port = 0;
};
Result<ListenAddress> ParseListenAddress(std::string_view host_port);

struct RequestHead {
  std::string method;
  std::string path;  // the target without its query string
};

struct HeadParse {
  enum class State { kIncomplete, kComplete, kBad, kTooLarge };
  State state = State::kIncomplete;
  RequestHead head;   // when kComplete
  std::string error;  // when kBad
};

// Looks at what a client has sent so far. kIncomplete: wait for more (when
// buffered is still within max_head_bytes); kTooLarge: no end of the head
// within max_head_bytes.
HeadParse ParseRequestHead(std::string_view buffered, size_t max_head_bytes);

// What a complete request head gets: 200 (render the metrics: body empty
// here), 404 or 405 with their body and, for 405, the Allow header line.
struct Route {
  int status = 200;
  std::string body;          // for 404 / 405
  std::string extra_header;  // "Allow: GET" for 405, else empty
};
Route RouteRequest(const RequestHead& head);

// A whole response: status line, Content-Type, Content-Length, Connection:
// close, the extra header line if any (without its CRLF), then body.
std::string HttpResponse(int status, std::string_view content_type, std::string_view body,
                         std::string_view extra_header = {});

inline constexpr std::string_view kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace npuprof::metrics
