// MetricsHttpServer: the responder behind `npuprof server --metrics-listen`.
// One thread of its own serves GET /metrics from a render callback
// (request and response rules: broker/metrics_http_request.h). It never
// touches the broker loop: the callback renders BrokerMetrics under that
// object's mutex.
//
// Contracts:
//  * Unauthenticated and read-only, so loopback only by default: Start
//    refuses a host that resolves to any address outside 127.0.0.0/8 and
//    ::1 (0.0.0.0, ::, a routable address, a name that resolves to one)
//    unless Options::allow_non_loopback is set (`--metrics-allow-remote`).
//  * One thread, non-blocking sockets, poll(): at most max_clients
//    connections at once (more wait in the listen backlog); each gets
//    client_timeout from its accept to send its request head and read the
//    answer, then it is closed; a head longer than max_head_bytes is answered
//    431 and closed. One request per connection.
//  * Nothing a client sends ends the process or the thread: malformed input
//    is answered 400, an exception from the render callback 500, a failing
//    socket is closed.
//  * The destructor stops the thread and closes every socket.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <sys/socket.h>

#include "broker/metrics_http_request.h"
#include "common/status.h"

namespace npuprof::metrics {

// 127.0.0.0/8, ::1, or an IPv4-mapped ::ffff:127.x.y.z.
bool IsLoopback(const sockaddr* a);

class MetricsHttpServer {
 public:
  struct Options {
    size_t max_head_bytes = 8192;
    std::chrono::milliseconds client_timeout{5000};
    size_t max_clients = 16;
    // Bind an address beyond loopback (the operator asked for it explicitly).
    bool allow_non_loopback = false;
  };
  using Render = std::function<std::string()>;

  static Result<std::unique_ptr<MetricsHttpServer>> Start(const ListenAddress& where, Render render,
                                                          Options options);
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const ListenAddress& where, Render render) {
    return Start(where, std::move(render), Options{});
  }
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Where it listens, as "host:port" ("[v6]:port") with the bound port.
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }
  // Requests answered so far (any status).
  uint64_t answered() const { return answered_.load(); }

 private:
  MetricsHttpServer(int listen_fd, int wake_fd, Render render, Options options);
  void Loop();

  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: the destructor wakes the loop with it
  Render render_;
  Options options_;
  std::string address_;
  uint16_t port_ = 0;
  std::atomic<uint64_t> answered_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace npuprof::metrics
