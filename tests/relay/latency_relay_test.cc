// The latency relay (tests/support/latency_relay.h) over loopback sockets,
// in front of small servers run on threads of this test: it delays by at
// least its delay, keeps bytes exact and in order over megabytes, counts the
// turns of a known ping-pong exactly, forwards half closes, closes one side
// when the other resets, refuses cleanly
// when nothing listens upstream and closes every socket it opened.
// Lower bounds only: how fast it is belongs to the benchmarks.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/latency_relay.h"
#include "tests/support/sshd_fixture.h"

namespace npuprof::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kIoTimeoutS = 20;

// Timeouts on every blocking call; no Nagle (a second small write would wait
// for the first one's ACK, which the far side delays).
void SetTimeouts(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  timeval tv{kIoTimeoutS, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  SetTimeouts(fd);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Exactly n bytes, or fewer when the stream ended or failed.
std::string ReadN(int fd, size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    const ssize_t k = ::recv(fd, buf, std::min(sizeof(buf), n - out.size()), 0);
    if (k <= 0) break;
    out.append(buf, static_cast<size_t>(k));
  }
  return out;
}

// Whether the stream ends (a read returns 0 or a reset) within the socket timeout.
bool ReadsEnd(int fd) {
  char b;
  const ssize_t k = ::recv(fd, &b, 1, 0);
  return k == 0 || (k < 0 && errno == ECONNRESET);
}

// Makes the server's close (after its handler) a reset, as when a process
// dies with data unread.
void ResetOnClose(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

// A server on 127.0.0.1 answering `connections` connections, one after the
// other, each with `handle` on its thread.
class TestServer {
 public:
  TestServer(std::function<void(int)> handle, int connections = 1) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t len = sizeof(a);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(fd_, 8);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, handle, connections] {
      for (int i = 0; i < connections; ++i) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, kIoTimeoutS * 1000) != 1) return;
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        SetTimeouts(c);
        handle(c);
        ::close(c);
      }
    });
  }
  ~TestServer() {
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
  std::thread thread_;
};

std::unique_ptr<LatencyRelay> StartRelay(int upstream_port, int64_t delay_us, int64_t bytes_per_s = 0) {
  RelayOptions o;
  o.upstream_port = upstream_port;
  o.delay_us = delay_us;
  o.bytes_per_s = bytes_per_s;
  auto r = std::make_unique<LatencyRelay>(o);
  EXPECT_TRUE(r->Start().ok());
  return r;
}

// Polls the relay until no connection is open (each closes after both ends are forwarded).
bool AllClosed(const LatencyRelay& r) {
  for (auto deadline = Clock::now() + 10s; Clock::now() < deadline; std::this_thread::sleep_for(5ms))
    if (r.Stats().open_connections == 0) return true;
  return false;
}

size_t OpenFds() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

TEST(LatencyRelay, DelaysEachDirectionByAtLeastTheDelay) {
  std::atomic<int64_t> server_got_us{0};
  TestServer echo([&](int c) {
    std::string b = ReadN(c, 1);
    server_got_us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
    WriteAll(c, b.data(), b.size());
    ReadsEnd(c);
  });
  auto relay = StartRelay(echo.port(), 50000);
  const int fd = Connect(relay->port());
  ASSERT_GE(fd, 0);
  const auto t0 = Clock::now();
  ASSERT_TRUE(WriteAll(fd, "x", 1));
  ASSERT_EQ(ReadN(fd, 1), "x");
  const auto t1 = Clock::now();
  EXPECT_GE(t1 - t0, 100ms);  // round trip: 2 x 50 ms
  const auto sent_us = std::chrono::duration_cast<std::chrono::microseconds>(t0.time_since_epoch()).count();
  EXPECT_GE(server_got_us - sent_us, 50000);  // one way
  ::close(fd);
  EXPECT_TRUE(AllClosed(*relay));
}

TEST(LatencyRelay, KeepsEveryByteInOrderOverMegabytesBothWays) {
  constexpr size_t kBytes = 4 << 20;
  TestServer echo([](int c) {
    char buf[65536];
    while (true) {
      const ssize_t k = ::recv(c, buf, sizeof(buf), 0);
      if (k <= 0 || !WriteAll(c, buf, static_cast<size_t>(k))) break;
    }
  });
  auto relay = StartRelay(echo.port(), 20000);
  std::string data(kBytes, '\0');
  std::mt19937 rng(42);
  for (auto& ch : data) ch = static_cast<char>(rng());
  const int fd = Connect(relay->port());
  ASSERT_GE(fd, 0);
  std::thread writer([&] {
    std::mt19937 sizes(7);
    for (size_t off = 0; off < data.size();) {
      const size_t n = std::min<size_t>(data.size() - off, 1 + sizes() % 100000);
      if (!WriteAll(fd, data.data() + off, n)) return;
      off += n;
    }
    ::shutdown(fd, SHUT_WR);
  });
  const std::string back = ReadN(fd, kBytes);
  writer.join();
  EXPECT_TRUE(ReadsEnd(fd));  // the echo server saw the end and closed: forwarded back
  ::close(fd);
  ASSERT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data) << "bytes differ or are out of order";
  ASSERT_TRUE(AllClosed(*relay));
  const RelayStats s = relay->Stats();
  EXPECT_EQ(s.bytes_to_server, kBytes);
  EXPECT_EQ(s.bytes_to_client, kBytes);
  ASSERT_EQ(s.per_connection.size(), 1u);
  EXPECT_EQ(s.per_connection[0].bytes_to_server, kBytes);
  EXPECT_GE(s.per_connection[0].closed_ms, s.per_connection[0].opened_ms);
}

TEST(LatencyRelay, CountsTheTurnsOfAPingPongExactly) {
  constexpr int kRounds = 25;
  TestServer pong([](int c) {
    for (int i = 0; i < kRounds; ++i) {
      if (ReadN(c, 4) != "ping" || !WriteAll(c, "pong", 4)) return;
    }
    ReadsEnd(c);
  }, 2);
  auto relay = StartRelay(pong.port(), 2000);
  const auto before = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  for (int conn = 0; conn < 2; ++conn) {
    const int fd = Connect(relay->port());
    ASSERT_GE(fd, 0);
    for (int i = 0; i < kRounds; ++i) {
      ASSERT_TRUE(WriteAll(fd, "pi", 2));  // one request in two writes: still one turn
      ASSERT_TRUE(WriteAll(fd, "ng", 2));
      ASSERT_EQ(ReadN(fd, 4), "pong");
    }
    ::close(fd);
  }
  ASSERT_TRUE(AllClosed(*relay));
  const RelayStats s = relay->Stats();
  EXPECT_EQ(s.turns, 2u * kRounds);
  EXPECT_EQ(s.connections, 2u);
  ASSERT_EQ(s.per_connection.size(), 2u);
  for (const auto& c : s.per_connection) {
    EXPECT_EQ(c.turns, static_cast<uint64_t>(kRounds));
    EXPECT_EQ(c.bytes_to_server, 4u * kRounds);
    EXPECT_EQ(c.bytes_to_client, 4u * kRounds);
    ASSERT_EQ(c.turn_ms.size(), static_cast<size_t>(kRounds));
    EXPECT_GE(c.turn_ms.front(), before);
    for (size_t i = 1; i < c.turn_ms.size(); ++i) EXPECT_GE(c.turn_ms[i], c.turn_ms[i - 1]);
  }
  // The same counts as a stats file.
  char dir[] = "/tmp/npuprof-relay-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/relay.json";
  ASSERT_TRUE(relay->WriteStats(path).ok());
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f, nullptr, false);
  ::unlink(path.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.value("turns", 0), 2 * kRounds);
  EXPECT_EQ(j["per_connection"].size(), 2u);
}

TEST(LatencyRelay, ForwardsAHalfCloseAndClosesEverySocketItOpened) {
  const size_t fds_before = OpenFds();
  {
    TestServer server([](int c) {
      const std::string got = ReadN(c, 1 << 20);  // until the client's end arrives
      const std::string reply = "got " + std::to_string(got.size());
      WriteAll(c, reply.data(), reply.size());
    });
    auto relay = StartRelay(server.port(), 10000);
    const int fd = Connect(relay->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(WriteAll(fd, "hello", 5));
    ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
    EXPECT_EQ(ReadN(fd, 64), "got 5");  // the server read to the end, answered and closed
    ::close(fd);
    EXPECT_TRUE(AllClosed(*relay));
    relay->Stop();
    relay->Stop();  // idempotent
  }
  EXPECT_EQ(OpenFds(), fds_before);
}

TEST(LatencyRelay, AnUpstreamThatDoesNotAcceptClosesTheClient) {
  const int dead_port = FreeLoopbackPort();
  ASSERT_GT(dead_port, 0);
  auto relay = StartRelay(dead_port, 1000);
  const int fd = Connect(relay->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(ReadsEnd(fd));
  ::close(fd);
  for (auto deadline = Clock::now() + 10s; relay->Stats().refused == 0 && Clock::now() < deadline;)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(relay->Stats().refused, 1u);
  EXPECT_EQ(relay->Stats().connections, 0u);
}

TEST(LatencyRelay, ASideThatGoesAwayWithDataInFlightClosesTheOther) {
  TestServer rude([](int c) {
    ReadN(c, 1);
    ResetOnClose(c);  // with the rest unread
  });
  auto relay = StartRelay(rude.port(), 5000);
  const int fd = Connect(relay->port());
  ASSERT_GE(fd, 0);
  const std::string data(1 << 20, 'd');
  WriteAll(fd, data.data(), data.size());  // may fail part-way: the relay resets this side too
  EXPECT_TRUE(ReadsEnd(fd));
  ::close(fd);
  EXPECT_TRUE(AllClosed(*relay));
}

TEST(LatencyRelay, ACapHoldsABulkTransferToItsRate) {
  constexpr size_t kBytes = 1 << 20;
  TestServer sink([](int c) {
    const std::string got = ReadN(c, kBytes);
    WriteAll(c, got.size() == kBytes ? "k" : "?", 1);
    ReadsEnd(c);
  });
  auto relay = StartRelay(sink.port(), 0, 4 << 20);  // 4 MiB/s: at least 250 ms for 1 MiB
  const int fd = Connect(relay->port());
  ASSERT_GE(fd, 0);
  const std::string data(kBytes, 'b');
  const auto t0 = Clock::now();
  ASSERT_TRUE(WriteAll(fd, data.data(), data.size()));
  EXPECT_EQ(ReadN(fd, 1), "k");
  EXPECT_GE(Clock::now() - t0, 250ms);
  ::close(fd);
  EXPECT_TRUE(AllClosed(*relay));
}

TEST(LatencyRelay, RefusesOptionsItCannotUse) {
  RelayOptions o;
  o.upstream_port = 0;
  EXPECT_EQ(LatencyRelay(o).Start().code(), Code::kInvalidArgument);
  o.upstream_port = 22;
  o.listen_address = "not-an-address";
  EXPECT_EQ(LatencyRelay(o).Start().code(), Code::kInvalidArgument);
  o.listen_address = "127.0.0.1";
  o.delay_us = -1;
  EXPECT_EQ(LatencyRelay(o).Start().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace npuprof::testing
