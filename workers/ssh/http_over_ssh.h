// HTTP/1.1 over SSH direct-tcpip channels: request/response types and the pure
// request writer / response parser. SshSession::Http and SshSession::HttpMany
// (implemented in http_over_ssh.cc) carry them over the session; no port is
// ever opened on the local machine.
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

// Serialises `req` as an HTTP/1.1 request with Connection: close. Rejects
// methods/paths/headers containing CR, LF, NUL or (method, path) spaces.
Result<std::string> BuildHttpRequest(const HttpRequest& req);

// True once `raw` holds a whole response (by Content-Length, chunked trailer,
// or a status that has no body). Responses delimited by EOF are never
// complete here; the reader waits for EOF.
bool HttpResponseComplete(std::string_view raw, bool head_request = false);

// Parses a complete response (the bytes read until EOF). Errors: kCorruption
// for malformed status line/headers/chunks or a body shorter than announced.
Result<HttpResponse> ParseHttpResponse(std::string_view raw, bool head_request = false);

}  // namespace npuprof::ssh
