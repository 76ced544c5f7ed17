// The /metrics responder: request heads parsed (and fuzzed), listen
// addresses, and a live server on loopback answering good, bad, huge, slow
// and random requests without ever stopping to serve.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "broker/metrics_http.h"

namespace npuprof::metrics {
namespace {

using State = HeadParse::State;

TEST(MetricsHttpRequest, ParsesTheRequestLineOfACompleteHead) {
  auto p = ParseRequestHead("GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n", 8192);
  ASSERT_EQ(p.state, State::kComplete) << p.error;
  EXPECT_EQ(p.head.method, "GET");
  EXPECT_EQ(p.head.path, "/metrics");
  p = ParseRequestHead("\r\nGET /metrics?name[]=x HTTP/1.0\n\n", 8192);  // leading empty line, bare LFs, query
  ASSERT_EQ(p.state, State::kComplete) << p.error;
  EXPECT_EQ(p.head.path, "/metrics");
  p = ParseRequestHead("POST /other HTTP/1.1\r\n\r\nbody", 8192);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.head.method, "POST");
  EXPECT_EQ(p.head.path, "/other");
}

TEST(MetricsHttpRequest, WaitsForTheEndOfTheHeadWithinTheCap) {
  EXPECT_EQ(ParseRequestHead("", 100).state, State::kIncomplete);
  EXPECT_EQ(ParseRequestHead("GET /metrics HTTP/1.1\r\nHost: x\r\n", 100).state, State::kIncomplete);
  EXPECT_EQ(ParseRequestHead(std::string(101, 'a'), 100).state, State::kTooLarge);
  EXPECT_EQ(ParseRequestHead(std::string(101, '\n'), 100).state, State::kTooLarge);
  // Complete, but longer than the cap.
  EXPECT_EQ(ParseRequestHead("GET /metrics HTTP/1.1\r\nX: " + std::string(100, 'x') + "\r\n\r\n", 100).state,
            State::kTooLarge);
}

TEST(MetricsHttpRequest, RefusesWhatIsNotAnHttp1RequestLine) {
  for (const char* bad : {"GET\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
                          "GET /metrics HTTP/1.1 extra\r\n\r\n", "GET /metrics HTTP/2.0\r\n\r\n",
                          "GET /metrics SPDY/1.1\r\n\r\n", "G(T /metrics HTTP/1.1\r\n\r\n",
                          "GET /met\x01rics HTTP/1.1\r\n\r\n", "GET /m\xc3\xa9trics HTTP/1.1\r\n\r\n",
                          "VERYLONGMETHODNAMEXX / HTTP/1.1\r\n\r\n"}) {
    auto p = ParseRequestHead(bad, 8192);
    EXPECT_EQ(p.state, State::kBad) << bad;
    EXPECT_FALSE(p.error.empty());
  }
}

TEST(MetricsHttpRequest, RandomBytesGetADecisionNeverACrash) {
  std::mt19937 rng(20);
  const std::string pieces[] = {"GET", " ", "/metrics", "HTTP/1.1", "\r\n", "\n", "?", "\x00", "\xff", "%"};
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      if (i % 2) s += pieces[rng() % std::size(pieces)];
      else s.push_back(static_cast<char>(rng()));
    }
    const auto p = ParseRequestHead(s, 64);
    if (p.state == State::kComplete) {
      EXPECT_EQ(p.head.path.find('?'), std::string::npos);
    }
  }
}

TEST(MetricsHttpRequest, ListenAddresses) {
  auto a = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9464);
  a = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  a = ParseListenAddress(":9100");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  for (const char* bad : {"", "9464", "host:", "host:65536", "host:-1", "host:12x", "::1:9464", "[::1:9464",
                          "ho st:1"}) {
    auto r = ParseListenAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("HOST:PORT"), std::string::npos);
    }
  }
}

// ---------------------------------------------------------------- live server

int Connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close on us (huge requests): what it answered is checked
    off += static_cast<size_t>(n);
  }
}

// Everything the server sends until it closes (or timeout: then "<timeout>" is appended).
std::string ReadUntilClosed(int fd, int timeout_ms = 20000) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return out + "<timeout>";
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string Exchange(uint16_t port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "<no connection>";
  SendAll(fd, request);
  std::string r = ReadUntilClosed(fd);
  ::close(fd);
  return r;
}

std::string StatusLine(const std::string& response) { return response.substr(0, response.find("\r\n")); }

class LiveServer : public ::testing::Test {
 protected:
  void StartWith(MetricsHttpServer::Options o, MetricsHttpServer::Render render = nullptr) {
    if (!render) render = [this] { return "# HELP x_total h\n# TYPE x_total counter\nx_total " + std::to_string(++renders_) + "\n"; };
    auto s = MetricsHttpServer::Start(ListenAddress{"127.0.0.1", 0}, std::move(render), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    ASSERT_NE(server_->port(), 0);
  }
  std::string Scrape() { return Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n"); }

  std::atomic<int> renders_{0};
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(LiveServer, GetMetricsIs200WithTheExpositionContentType) {
  StartWith({});
  EXPECT_EQ(server_->address(), "127.0.0.1:" + std::to_string(server_->port()));
  const std::string r = Scrape();
  EXPECT_EQ(StatusLine(r), "HTTP/1.1 200 OK") << r;
  EXPECT_NE(r.find("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << r;
  const std::string body = r.substr(r.find("\r\n\r\n") + 4);
  EXPECT_NE(r.find("\r\nContent-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("\r\nConnection: close\r\n"), std::string::npos);
  EXPECT_EQ(r.substr(r.find("\r\n\r\n") + 4), "# HELP x_total h\n# TYPE x_total counter\nx_total 1\n");
}

TEST_F(LiveServer, OtherMethodsAre405OtherPaths404AndNonHttp400) {
  StartWith({});
  EXPECT_EQ(StatusLine(Exchange(server_->port(), "GET / HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(Exchange(server_->port(), "GET /metricsx HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  // Another method on the one resource is 405 with the method it allows
  // (it used to be 404, as if /metrics did not exist).
  const std::string post = Exchange(server_->port(), "POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(StatusLine(post), "HTTP/1.1 405 Method Not Allowed") << post;
  EXPECT_NE(post.find("\r\nAllow: GET\r\n"), std::string::npos) << post;
  EXPECT_NE(post.find("method POST not allowed: /metrics answers GET only"), std::string::npos) << post;
  EXPECT_EQ(StatusLine(Exchange(server_->port(), "DELETE /metrics?x=1 HTTP/1.1\r\n\r\n")),
            "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(StatusLine(Exchange(server_->port(), "POST /other HTTP/1.1\r\n\r\n")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(StatusLine(Exchange(server_->port(), "hello there\r\n\r\n")), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(renders_.load(), 0);  // only GET /metrics renders
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
}

TEST_F(LiveServer, HugeRequestIs431AndTheServerGoesOn) {
  MetricsHttpServer::Options o;
  o.max_head_bytes = 1024;
  StartWith(o);
  const std::string r = Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(1100, 'x'));
  EXPECT_EQ(StatusLine(r), "HTTP/1.1 431 Request Header Fields Too Large") << r.substr(0, 200);
  // Far more than the cap, sent as fast as possible: answered or cut off, never more.
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  std::thread sender([fd] { SendAll(fd, std::string(8 << 20, 'y')); });
  const std::string big = ReadUntilClosed(fd);
  sender.join();
  ::close(fd);
  EXPECT_TRUE(big.empty() || StatusLine(big) == "HTTP/1.1 431 Request Header Fields Too Large") << big.substr(0, 200);
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
}

TEST_F(LiveServer, SlowClientIsClosedAfterItsTimeoutAndOthersAreServedMeanwhile) {
  MetricsHttpServer::Options o;
  o.client_timeout = std::chrono::milliseconds(300);
  StartWith(o);
  const int slow = Connect(server_->port());
  ASSERT_GE(slow, 0);
  SendAll(slow, "GET /metr");  // and nothing more
  // While the slow one holds its connection, the one thread answers others.
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
  // The slow client is dropped without an answer (it waits up to 20 s for that).
  EXPECT_EQ(ReadUntilClosed(slow), "");
  ::close(slow);
}

TEST_F(LiveServer, MoreClientsThanSlotsWaitInTheBacklog) {
  MetricsHttpServer::Options o;
  o.max_clients = 2;
  o.client_timeout = std::chrono::milliseconds(500);
  StartWith(o);
  const int a = Connect(server_->port()), b = Connect(server_->port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  // Both slots are held by silent clients; a third is answered once they time out.
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
  ::close(a);
  ::close(b);
}

TEST_F(LiveServer, RenderFailureIs500) {
  StartWith({}, []() -> std::string { throw std::runtime_error("boom"); });
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 500 Internal Server Error");
}

TEST_F(LiveServer, RandomBytesFromManyClientsNeverStopTheServer) {
  MetricsHttpServer::Options o;
  o.client_timeout = std::chrono::milliseconds(200);
  o.max_head_bytes = 512;
  StartWith(o);
  std::mt19937 rng(7);
  for (int i = 0; i < 60; ++i) {
    const int fd = Connect(server_->port());
    ASSERT_GE(fd, 0);
    std::string junk(rng() % 1500, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (i % 3 == 0) junk = "GET /metrics HTTP/1.1\r\n" + junk;
    SendAll(fd, junk);
    if (i % 2) ::shutdown(fd, SHUT_WR);
    if (i % 4) ReadUntilClosed(fd);  // the others just go away
    ::close(fd);
  }
  EXPECT_EQ(StatusLine(Scrape()), "HTTP/1.1 200 OK");
}

TEST(MetricsHttpServer, ABusyPortIsAClearError) {
  auto first = MetricsHttpServer::Start(ListenAddress{"127.0.0.1", 0}, [] { return std::string(); });
  ASSERT_TRUE(first.ok());
  auto second = MetricsHttpServer::Start(ListenAddress{"127.0.0.1", (*first)->port()}, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos)
      << second.status().ToString();
  auto unresolvable = MetricsHttpServer::Start(ListenAddress{"no.such.host.invalid", 0}, [] { return std::string(); });
  EXPECT_FALSE(unresolvable.ok());
}

TEST(MetricsHttpServer, LoopbackAddressesAreRecognised) {
  const auto v4 = [](const char* text) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, text, &a.sin_addr), 1) << text;
    return IsLoopback(reinterpret_cast<const sockaddr*>(&a));
  };
  const auto v6 = [](const char* text) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, text, &a.sin6_addr), 1) << text;
    return IsLoopback(reinterpret_cast<const sockaddr*>(&a));
  };
  EXPECT_TRUE(v4("127.0.0.1"));
  EXPECT_TRUE(v4("127.255.3.4"));
  EXPECT_FALSE(v4("0.0.0.0"));
  EXPECT_FALSE(v4("10.0.0.1"));
  EXPECT_FALSE(v4("128.0.0.1"));
  EXPECT_TRUE(v6("::1"));
  EXPECT_TRUE(v6("::ffff:127.0.0.1"));
  EXPECT_FALSE(v6("::"));
  EXPECT_FALSE(v6("::ffff:10.0.0.1"));
  EXPECT_FALSE(v6("fe80::1"));
}

TEST(MetricsHttpServer, ANonLoopbackAddressIsRefusedUnlessAllowed) {
  for (const char* host : {"0.0.0.0", "::"}) {
    auto refused = MetricsHttpServer::Start(ListenAddress{host, 0}, [] { return std::string(); });
    ASSERT_FALSE(refused.ok()) << host;
    EXPECT_NE(refused.status().message().find("not a loopback address"), std::string::npos)
        << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("--metrics-allow-remote"), std::string::npos);
  }
  // Explicitly allowed: it binds the wildcard (and answers on loopback through it).
  MetricsHttpServer::Options o;
  o.allow_non_loopback = true;
  auto allowed = MetricsHttpServer::Start(ListenAddress{"0.0.0.0", 0}, [] { return std::string("x 1\n"); }, o);
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ((*allowed)->address().rfind("0.0.0.0:", 0), 0u) << (*allowed)->address();
  // A name that resolves to loopback only is loopback.
  auto local = MetricsHttpServer::Start(ListenAddress{"localhost", 0}, [] { return std::string(); });
  EXPECT_TRUE(local.ok()) << local.status().ToString();
}

}  // namespace
}  // namespace npuprof::metrics
