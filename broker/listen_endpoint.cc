#include "broker/listen_endpoint.h"

#include <charconv>

#include <fmt/format.h>

#include "common/utf8.h"

namespace npuprof::broker {

namespace {

// sizeof(sockaddr_un::sun_path) - 1 on Linux: the path and its NUL.
constexpr size_t kMaxIpcPathBytes = 107;

bool Printable(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return false;
  }
  return true;
}

}  // namespace

Status CheckListenEndpoint(std::string_view ep) {
  const auto refuse = [&](std::string_view why) {
    return Status::Invalid(fmt::format("--listen '{}': {}; expected tcp://HOST:PORT (PORT 1-65535), e.g. "
                                       "tcp://127.0.0.1:5555, or ipc://PATH",
                                       ToValidUtf8(ep.substr(0, 200)), why));
  };
  if (ep.rfind("ipc://", 0) == 0) {
    const std::string_view path = ep.substr(6);
    if (path.empty()) return refuse("no socket path");
    if (path == "*") return refuse("a wildcard ipc path names a file the server would not know");
    if (path.size() > kMaxIpcPathBytes)
      return refuse(fmt::format("the socket path is {} bytes, over the {} bytes a Unix socket path can have",
                                path.size(), kMaxIpcPathBytes));
    if (!Printable(path)) return refuse("the socket path has a space or control character");
    return Status::Ok();
  }
  if (ep.rfind("tcp://", 0) != 0) {
    const size_t scheme = ep.find("://");
    if (scheme == std::string_view::npos) return refuse("no transport");
    if (ep.substr(0, scheme) == "inproc")
      return refuse("inproc:// is reachable only from inside the server's own process");
    return refuse(fmt::format("transport '{}' is not one npuprof listens on", ToValidUtf8(ep.substr(0, scheme))));
  }
  const std::string_view rest = ep.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) return refuse("no port");
  std::string_view host = rest.substr(0, colon);
  const std::string_view port = rest.substr(colon + 1);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return refuse("an IPv6 address goes in brackets");
  } else if (host.find(':') != std::string_view::npos) {
    return refuse("an IPv6 address goes in brackets");
  }
  if (host.empty()) return refuse("no host (name one, or * for every interface)");
  if (!Printable(host) || host.find(';') != std::string_view::npos)
    return refuse("the host has a space, control character or ';'");
  if (port == "*" || port == "0")
    return refuse("a wildcard port binds one the server would not advertise: name the port");
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || v < 1 || v > 65535)
    return refuse("the port must be a number 1-65535");
  return Status::Ok();
}

}  // namespace npuprof::broker
