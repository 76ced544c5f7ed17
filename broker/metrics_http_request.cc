#include "broker/metrics_http_request.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace npuprof::metrics {

namespace {

constexpr size_t kMaxTarget = 2048;

bool IsTokenChar(char c) {
  // RFC 9110 tchar
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsTargetChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u < 0x7f;
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
  }
  return "Unknown";
}

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view s) {
  const auto usage = [&](std::string_view why) {
    return Status::Invalid(fmt::format("--metrics-listen '{}': {}; expected HOST:PORT, e.g. 127.0.0.1:9464 "
                                       "or [::1]:9464",
                                       s, why));
  };
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return usage("no port");
  std::string_view host = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return usage("an IPv6 address goes in brackets");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return usage("an IPv6 address goes in brackets");
  }
  unsigned v = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || v > 65535)
    return usage("the port must be a number 0-65535");
  for (char c : host)
    if (!IsTargetChar(c)) return usage("the host has a space or control character");
  return ListenAddress{host.empty() ? std::string("127.0.0.1") : std::string(host), static_cast<uint16_t>(v)};
}

HeadParse ParseRequestHead(std::string_view in, size_t max_head_bytes) {
  HeadParse out;
  // Empty lines before the request line are ignored (RFC 9112 2.2).
  size_t start = 0;
  while (start < in.size() && (in[start] == '\r' || in[start] == '\n')) ++start;
  const std::string_view rest = in.substr(start);
  constexpr size_t npos = std::string_view::npos;
  const size_t crlf = rest.find("\r\n\r\n"), lf = rest.find("\n\n");
  size_t head_len = crlf == npos ? npos : crlf + 4;
  if (lf != npos) head_len = std::min(head_len, lf + 2);
  if (head_len == npos) {  // not all there yet: wait, unless the cap is reached
    out.state = in.size() > max_head_bytes ? HeadParse::State::kTooLarge : HeadParse::State::kIncomplete;
    return out;
  }
  if (start + head_len > max_head_bytes) {
    out.state = HeadParse::State::kTooLarge;
    return out;
  }
  const auto bad = [&](std::string why) {
    out.state = HeadParse::State::kBad;
    out.error = std::move(why);
    return out;
  };
  std::string_view line = rest.substr(0, rest.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return bad("the request line has no target");
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return bad("the request line is not METHOD TARGET HTTP/1.x");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (method.empty() || method.size() > 16) return bad("bad method");
  for (char c : method)
    if (!IsTokenChar(c)) return bad("bad method");
  if (target.empty() || target.size() > kMaxTarget) return bad("bad target");
  for (char c : target)
    if (!IsTargetChar(c)) return bad("bad target");
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' || version[7] > '9')
    return bad("not HTTP/1.x");
  out.state = HeadParse::State::kComplete;
  out.head.method = std::string(method);
  out.head.path = std::string(target.substr(0, target.find('?')));
  return out;
}

Route RouteRequest(const RequestHead& head) {
  if (head.path != "/metrics") return {404, "not found: the only resource is GET /metrics\n", ""};
  if (head.method != "GET")
    return {405, fmt::format("method {} not allowed: /metrics answers GET only\n", head.method), "Allow: GET"};
  return {};
}

std::string HttpResponse(int status, std::string_view content_type, std::string_view body,
                         std::string_view extra_header) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                                status, Reason(status), content_type, body.size());
  if (!extra_header.empty()) out += fmt::format("{}\r\n", extra_header);
  out += "\r\n";
  out.append(body);
  return out;
}

}  // namespace npuprof::metrics
