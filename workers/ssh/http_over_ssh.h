// HTTP/1.1 over SSH direct-tcpip channels: request/response types and the pure
// request writer / response parser. SshSession::Http and SshSession::HttpMany
// (implemented in http_over_ssh.cc) carry them over the session; no port is
// ever opened on the local machine. HttpMany keeps a channel for the next
// request to the same host and port when the response allows it (HTTP/1.1
// keep-alive), so a wave pays one channel open per slot, not per request, and
// opens the first slots' channels at once (one round trip for all their
// confirmations, not one each); a
// request is never sent twice (a kept connection that the service closes
// before answering fails that request, saying so).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace npuprof::ssh {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// A response (status line, headers and body as received) larger than this is
// refused (docs/RELIABILITY.md, "Caps"): vLLM's answers are kilobytes.
inline constexpr size_t kHttpResponseCap = size_t{16} << 20;

struct HttpRequest {
  std::string remote_host = "127.0.0.1";  // as seen from the target machine
  int remote_port = 0;
  std::string method = "GET";
  std::string path = "/";
  HttpHeaders headers;  // Host, Connection and Content-Length are added
  std::string body;
  std::chrono::milliseconds timeout{10000};  // whole request: open, send, read
  size_t max_response_bytes = kHttpResponseCap;
};

struct HttpResponse {
  int status = 0;
  std::string reason;
  HttpHeaders headers;  // in received order, names as received
  std::string body;     // de-chunked
  int64_t latency_ms = 0;

  // Case-insensitive header lookup (first match).
  std::optional<std::string> Header(std::string_view name) const;
};

// Serialises `req` as an HTTP/1.1 request with Connection: close (or
// keep-alive, when the sender means to send another request on the same
// connection). Rejects methods/paths/headers containing CR, LF, NUL or
// (method, path) spaces.
Result<std::string> BuildHttpRequest(const HttpRequest& req, bool keep_alive = false);

// Whether the connection a complete response `raw` came on may carry the
// next request: an HTTP/1.1 response without "Connection: close" whose end
// is known without the connection's end (Content-Length, chunked, no body).
bool HttpConnectionReusable(std::string_view raw, const HttpResponse& parsed);

// True once `raw` holds a whole response (by Content-Length, chunked trailer,
// or a status that has no body). Responses delimited by EOF are never
// complete here; the reader waits for EOF.
bool HttpResponseComplete(std::string_view raw, bool head_request = false);

// Parses a complete response (the bytes read until EOF). Errors: kCorruption
// for malformed status line/headers/chunks or a body shorter than announced.
Result<HttpResponse> ParseHttpResponse(std::string_view raw, bool head_request = false);

}  // namespace npuprof::ssh
