#include "broker/metrics_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace npuprof::metrics {

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  enum class Phase { kReading, kWriting, kDraining };
  int fd = -1;
  Phase phase = Phase::kReading;
  std::string in, out;
  size_t sent = 0;
  Clock::time_point deadline;
  bool closed = false;
};

void Close(Conn& c) {
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
  c.closed = true;
}

std::string AddressText(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    return fmt::format("[{}]:{}", host, ntohs(v6->sin6_port));
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
  inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
  return fmt::format("{}:{}", host, ntohs(v4->sin_port));
}

}  // namespace

bool IsLoopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(a);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  if (a->sa_family == AF_INET6) {
    const in6_addr& v6 = reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const ListenAddress& where, Render render,
                                                                    Options options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(where.port);
  if (int rc = getaddrinfo(where.host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return Status::Invalid(fmt::format("metrics: cannot resolve '{}': {}", where.host, gai_strerror(rc)));
  if (!options.allow_non_loopback) {
    for (addrinfo* ai = found; ai; ai = ai->ai_next) {
      if (IsLoopback(ai->ai_addr)) continue;
      freeaddrinfo(found);
      return Status::Invalid(fmt::format(
          "metrics: '{}' is not a loopback address and the metrics endpoint is unauthenticated; bind it to "
          "127.0.0.1 or [::1] (and let Prometheus reach it locally or through a tunnel), or pass "
          "--metrics-allow-remote to serve it beyond this machine",
          where.host));
    }
  }
  int fd = -1;
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 64) == 0) break;
    last_error = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  if (fd < 0)
    return Status::Unavailable(fmt::format("metrics: cannot listen on {}:{}: {}", where.host, where.port, last_error));
  const int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    ::close(fd);
    return Status::Io(std::string("metrics: eventfd: ") + std::strerror(errno));
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer(fd, wake, std::move(render), options));
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    s->address_ = AddressText(bound);
    s->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                 : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  s->thread_ = std::thread([raw = s.get()] { raw->Loop(); });
  return s;
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_fd, Render render, Options options)
    : listen_fd_(listen_fd), wake_fd_(wake_fd), render_(std::move(render)), options_(options) {}

MetricsHttpServer::~MetricsHttpServer() {
  stop_ = true;
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void MetricsHttpServer::Loop() {
  std::vector<Conn> conns;
  std::vector<pollfd> fds;
  Clock::time_point accept_resume{};  // after running out of descriptors
  // The answer to a complete head (or to what makes it unanswerable).
  auto respond = [this](Conn& c, int status, std::string_view type, std::string_view body,
                        std::string_view extra_header = {}) {
    c.out = HttpResponse(status, type, body, extra_header);
    c.sent = 0;
    c.phase = Conn::Phase::kWriting;
  };
  auto on_head = [&](Conn& c, bool eof) {
    const HeadParse p = ParseRequestHead(c.in, options_.max_head_bytes);
    switch (p.state) {
      case HeadParse::State::kIncomplete:
        if (eof) Close(c);  // the client gave up before its request was complete
        return;
      case HeadParse::State::kTooLarge:
        return respond(c, 431, "text/plain", fmt::format("request head over {} bytes\n", options_.max_head_bytes));
      case HeadParse::State::kBad: return respond(c, 400, "text/plain", p.error + "\n");
      case HeadParse::State::kComplete: break;
    }
    if (const Route route = RouteRequest(p.head); route.status != 200)
      return respond(c, route.status, "text/plain", route.body, route.extra_header);
    std::string body;
    try {
      body = render_();
    } catch (const std::exception& e) {
      spdlog::error("metrics: rendering failed: {}", e.what());
      return respond(c, 500, "text/plain", "rendering the metrics failed\n");
    }
    respond(c, 200, kExpositionContentType, body);
  };
  auto on_readable = [&](Conn& c) {
    char buf[4096];
    bool eof = false;
    while (true) {
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (c.phase != Conn::Phase::kReading) continue;  // draining: discard
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.size() > options_.max_head_bytes) break;
        continue;
      }
      if (n == 0) eof = true;
      else if (errno == EINTR) continue;
      else if (errno != EAGAIN && errno != EWOULDBLOCK) return Close(c);
      break;
    }
    if (c.phase == Conn::Phase::kDraining) {
      if (eof) Close(c);
      return;
    }
    on_head(c, eof);
  };
  auto on_writable = [&](Conn& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      return Close(c);
    }
    ++answered_;
    // Half-close, then read until the client closes too, so that bytes it
    // sent after its head do not turn our close into a reset that could
    // discard the answer before it is read.
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Conn::Phase::kDraining;
    c.out.clear();
    c.out.shrink_to_fit();
    c.in.clear();
    c.deadline = std::min(c.deadline, Clock::now() + std::chrono::seconds(1));
  };

  while (!stop_) {
    const auto now = Clock::now();
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = conns.size() < options_.max_clients && now >= accept_resume;
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    auto wake_at = now + std::chrono::seconds(1);
    if (!accepting && conns.size() < options_.max_clients) wake_at = std::min(wake_at, accept_resume);
    for (const Conn& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.phase == Conn::Phase::kWriting ? POLLOUT : POLLIN), 0});
      wake_at = std::min(wake_at, c.deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake_at - now).count() + 1;
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait)));
    if (n < 0 && errno != EINTR) {
      spdlog::error("metrics: poll: {}", std::strerror(errno));
      break;
    }
    if (stop_) break;
    for (size_t i = 0; n > 0 && i < conns.size(); ++i) {
      Conn& c = conns[i];
      const short ev = fds[i + 2].revents;
      if (!ev) continue;
      if (c.phase == Conn::Phase::kWriting) {
        if (ev & (POLLOUT | POLLERR | POLLHUP)) on_writable(c);
      } else if (ev & (POLLIN | POLLERR | POLLHUP)) {
        on_readable(c);
        if (!c.closed && c.phase == Conn::Phase::kWriting) on_writable(c);  // answer at once when it fits
      }
    }
    if (n > 0 && (fds[1].revents & POLLIN)) {
      while (conns.size() < options_.max_clients) {
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
          Conn c;
          c.fd = fd;
          c.deadline = Clock::now() + options_.client_timeout;
          conns.push_back(std::move(c));
          continue;
        }
        if (errno == EINTR) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          spdlog::warn("metrics: cannot accept: {}", std::strerror(errno));
          accept_resume = Clock::now() + std::chrono::milliseconds(200);
        }
        break;  // EAGAIN, or a connection that failed before it was accepted
      }
    }
    const auto after = Clock::now();
    for (Conn& c : conns)
      if (!c.closed && after >= c.deadline) Close(c);  // too slow, or draining long enough
    std::erase_if(conns, [](const Conn& c) { return c.closed; });
  }
  for (Conn& c : conns) Close(c);
}

}  // namespace npuprof::metrics
