#include "tests/support/latency_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "tests/support/relay_link.h"

namespace npuprof::testing {
namespace {

int64_t SteadyUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Closes with a reset (the peer reads ECONNRESET, not a clean end).
void CloseAbortive(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

bool ToSockaddr(const std::string& address, int port, sockaddr_in* a) {
  *a = sockaddr_in{};
  a->sin_family = AF_INET;
  a->sin_port = htons(static_cast<uint16_t>(port));
  return ::inet_pton(AF_INET, address.c_str(), &a->sin_addr) == 1;
}

// A non-blocking socket connected to address:port within timeout_ms; -1 if not.
int ConnectWithin(const std::string& address, int port, int timeout_ms) {
  sockaddr_in a{};
  if (!ToSockaddr(address, port, &a)) return -1;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
  if (errno != EINPROGRESS) {
    ::close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof(err);
  if (::poll(&p, 1, timeout_ms) != 1 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Chunk {
  int64_t due_us = 0;
  std::string data;  // empty: the end of stream, forwarded as a half close
  size_t written = 0;
};

// One direction of one connection.
struct Pipe {
  std::deque<Chunk> queue;
  size_t queued_bytes = 0;
  bool read_closed = false;  // the sending side ended its stream (its end is queued)
  bool write_closed = false;  // that end was forwarded (shutdown of the receiving side)
  bool write_blocked = false;  // the last write would have blocked: wait for POLLOUT
};

struct Conn {
  size_t stats_index = 0;
  int client = -1, server = -1;
  Pipe up, down;  // up: client -> server
  TurnCounter turns;
  bool failed = false;
};

}  // namespace

nlohmann::json RelayStatsJson(const RelayStats& s) {
  nlohmann::json conns = nlohmann::json::array();
  for (const auto& c : s.per_connection) {
    conns.push_back({{"id", c.id}, {"opened_ms", c.opened_ms}, {"closed_ms", c.closed_ms},
                     {"bytes_to_server", c.bytes_to_server}, {"bytes_to_client", c.bytes_to_client},
                     {"turns", c.turns}, {"turn_ms", c.turn_ms}});
  }
  return {{"connections", s.connections}, {"open_connections", s.open_connections}, {"refused", s.refused},
          {"bytes_to_server", s.bytes_to_server}, {"bytes_to_client", s.bytes_to_client}, {"turns", s.turns},
          {"per_connection", conns}};
}

LatencyRelay::LatencyRelay(RelayOptions options) : options_(std::move(options)) {}

LatencyRelay::~LatencyRelay() { Stop(); }

Status LatencyRelay::Start() {
  if (thread_.joinable()) return Status::Precondition("relay already started");
  if (options_.delay_us < 0 || options_.bytes_per_s < 0)
    return Status::Invalid("relay: delay_us and bytes_per_s must be >= 0");
  sockaddr_in a{};
  if (!ToSockaddr(options_.listen_address, options_.listen_port, &a))
    return Status::Invalid("relay: listen_address '" + options_.listen_address + "' is not an IPv4 address");
  sockaddr_in up{};
  if (!ToSockaddr(options_.upstream_address, options_.upstream_port, &up) || options_.upstream_port <= 0)
    return Status::Invalid(fmt::format("relay: upstream {}:{} is not an IPv4 address and port",
                                       options_.upstream_address, options_.upstream_port));
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Status::Io(fmt::format("relay: socket: {}", std::strerror(errno)));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(a);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return Status::Io(fmt::format("relay: cannot listen on {}:{}: {}", options_.listen_address,
                                  options_.listen_port, err));
  }
  port_ = ntohs(a.sin_port);
  if (::pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return Status::Io(fmt::format("relay: pipe: {}", std::strerror(errno)));
  }
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void LatencyRelay::Stop() {
  if (thread_.joinable()) {
    stop_ = true;
    const char b = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fds_[1], &b, 1);
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_fds_[0], &wake_fds_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

RelayStats LatencyRelay::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status LatencyRelay::WriteStats(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << RelayStatsJson(Stats()).dump() << "\n";
    if (!f.good()) return Status::Io("relay: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::Io(fmt::format("relay: cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
  return Status::Ok();
}

// The relay's loop: everything here runs on its thread.
struct LatencyRelay::Loop {
  LatencyRelay& relay;
  LinkSchedule to_server, to_client;  // one link: all connections share each direction
  std::vector<std::unique_ptr<Conn>> conns;
  char buf[64 * 1024];

  explicit Loop(LatencyRelay& r)
      : relay(r), to_server(r.options_.delay_us, r.options_.bytes_per_s),
        to_client(r.options_.delay_us, r.options_.bytes_per_s) {}

  ~Loop() {
    for (auto& c : conns) Close(*c);
  }

  void Accept() {
    while (true) {
      const int client = ::accept4(relay.listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (client < 0) return;  // EAGAIN, or a connection that went away meanwhile
      const int server = ConnectWithin(relay.options_.upstream_address, relay.options_.upstream_port,
                                       relay.options_.connect_timeout_ms);
      std::lock_guard<std::mutex> lock(relay.mu_);
      if (server < 0) {
        ++relay.stats_.refused;
        CloseAbortive(client);
        continue;
      }
      NoDelay(client);
      NoDelay(server);
      auto c = std::make_unique<Conn>();
      c->client = client;
      c->server = server;
      c->stats_index = relay.stats_.per_connection.size();
      RelayConnectionStats s;
      s.id = ++relay.stats_.connections;
      s.opened_ms = WallMs();
      relay.stats_.per_connection.push_back(s);
      ++relay.stats_.open_connections;
      conns.push_back(std::move(c));
    }
  }

  // Reads what `from` has; queues it on `pipe`, due per `link`.
  void Read(Conn& c, int from, Pipe& pipe, LinkSchedule& link, bool to_server_dir) {
    while (!pipe.read_closed && pipe.queued_bytes < relay.options_.max_in_flight) {
      const ssize_t n = ::read(from, buf, sizeof(buf));
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      const int64_t now = SteadyUs();
      if (n < 0) {
        c.failed = true;
        return;
      }
      if (n == 0) {
        pipe.read_closed = true;
        pipe.queue.push_back(Chunk{link.DueAt(now, 0), std::string(), 0});
        return;
      }
      pipe.queue.push_back(Chunk{link.DueAt(now, static_cast<size_t>(n)), std::string(buf, static_cast<size_t>(n)), 0});
      pipe.queued_bytes += static_cast<size_t>(n);
      const bool turn = c.turns.OnData(to_server_dir ? TurnCounter::Direction::kToServer
                                                     : TurnCounter::Direction::kToClient);
      std::lock_guard<std::mutex> lock(relay.mu_);
      RelayConnectionStats& s = relay.stats_.per_connection[c.stats_index];
      (to_server_dir ? s.bytes_to_server : s.bytes_to_client) += static_cast<uint64_t>(n);
      (to_server_dir ? relay.stats_.bytes_to_server : relay.stats_.bytes_to_client) += static_cast<uint64_t>(n);
      if (turn) {
        ++s.turns;
        ++relay.stats_.turns;
        s.turn_ms.push_back(WallMs());
      }
    }
  }

  // Writes the chunks of `pipe` that are due to `to`.
  void Write(Conn& c, int to, Pipe& pipe, int64_t now) {
    while (!pipe.queue.empty() && pipe.queue.front().due_us <= now) {
      Chunk& ch = pipe.queue.front();
      if (ch.data.empty()) {
        ::shutdown(to, SHUT_WR);
        pipe.write_closed = true;
        pipe.queue.pop_front();
        continue;
      }
      const ssize_t n = ::send(to, ch.data.data() + ch.written, ch.data.size() - ch.written, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
          pipe.write_blocked = true;
          return;
        }
        c.failed = true;
        return;
      }
      pipe.write_blocked = false;
      ch.written += static_cast<size_t>(n);
      if (ch.written == ch.data.size()) {
        pipe.queued_bytes -= ch.data.size();
        pipe.queue.pop_front();
      }
    }
  }

  void Close(Conn& c) {
    if (c.client < 0) return;
    if (c.failed) {
      CloseAbortive(c.client);
      CloseAbortive(c.server);
    } else {
      ::close(c.client);
      ::close(c.server);
    }
    c.client = c.server = -1;
    std::lock_guard<std::mutex> lock(relay.mu_);
    relay.stats_.per_connection[c.stats_index].closed_ms = WallMs();
    --relay.stats_.open_connections;
  }

  void Run() {
    std::vector<pollfd> fds;
    while (!relay.stop_) {
      const int64_t now = SteadyUs();
      fds.clear();
      fds.push_back({relay.wake_fds_[0], POLLIN, 0});
      fds.push_back({relay.listen_fd_, POLLIN, 0});
      int64_t next_due = -1;
      for (auto& c : conns) {
        const auto events = [&](const Pipe& in, const Pipe& out) {
          short ev = 0;
          if (!in.read_closed && in.queued_bytes < relay.options_.max_in_flight) ev |= POLLIN;
          if (out.write_blocked) ev |= POLLOUT;
          return ev;
        };
        // A side with nothing to wait for is left out (-1): an ended stream
        // would report POLLHUP at once, every turn of the loop.
        const short cev = events(c->up, c->down), sev = events(c->down, c->up);
        fds.push_back({cev ? c->client : -1, cev, 0});
        fds.push_back({sev ? c->server : -1, sev, 0});
        for (const Pipe* p : {&c->up, &c->down}) {
          if (p->queue.empty() || p->write_blocked) continue;
          const int64_t due = p->queue.front().due_us;
          next_due = next_due < 0 ? due : std::min(next_due, due);
        }
      }
      // Sleep until the next chunk is due (rounded up to a whole ms), or 1 s.
      int timeout_ms = 1000;
      if (next_due >= 0) timeout_ms = static_cast<int>(std::clamp<int64_t>((next_due - now + 999) / 1000, 0, 1000));
      if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
      if (fds[0].revents) {
        char drain[64];
        while (::read(relay.wake_fds_[0], drain, sizeof(drain)) > 0) {
        }
      }
      if (fds[1].revents & POLLIN) Accept();
      const int64_t t = SteadyUs();
      for (size_t i = 0; i < conns.size() && 2 + 2 * i + 1 < fds.size(); ++i) {
        Conn& c = *conns[i];
        const short cre = fds[2 + 2 * i].revents, sre = fds[2 + 2 * i + 1].revents;
        if (cre & (POLLIN | POLLHUP | POLLERR)) Read(c, c.client, c.up, to_server, true);
        if (sre & (POLLIN | POLLHUP | POLLERR)) Read(c, c.server, c.down, to_client, false);
        // Writable, or failed (the write below then says how): either way try again.
        if (cre & (POLLOUT | POLLERR | POLLHUP)) c.down.write_blocked = false;
        if (sre & (POLLOUT | POLLERR | POLLHUP)) c.up.write_blocked = false;
      }
      for (auto& c : conns) {
        if (!c->failed && !c->up.write_blocked) Write(*c, c->server, c->up, t);
        if (!c->failed && !c->down.write_blocked) Write(*c, c->client, c->down, t);
        if (c->failed || (c->up.write_closed && c->down.write_closed)) Close(*c);
      }
      conns.erase(std::remove_if(conns.begin(), conns.end(), [](const auto& c) { return c->client < 0; }),
                  conns.end());
    }
  }
};

void LatencyRelay::Run() {
  Loop loop(*this);
  loop.Run();
}

}  // namespace npuprof::testing
