// Http / HttpMany through direct-tcpip channels to a small Python HTTP server
// started on the target with Exec (nohup). No local port is used by the client.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "tests/support/sshd_fixture.h"
#include "workers/ssh/shell_quote.h"
#include "workers/ssh/ssh_session.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::ssh {
namespace {

using namespace std::chrono_literals;

constexpr const char* kServer = R"PY(import sys, time, http.server
DROPS = [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello", b", ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/big":
            return self.reply(200, b"x" * 1048576)
        if self.path.startswith("/sleep/"):
            time.sleep(float(self.path.split("/")[2]))
        if self.path == "/missing":
            return self.reply(404, b"not here")
        if self.path == "/drop":  # read, then the connection closed without an answer
            DROPS[0] += 1
            self.close_connection = True
            return
        if self.path == "/drops":
            return self.reply(200, str(DROPS[0]).encode())
        if self.path.startswith("/closing/"):  # an answer that ends its connection
            body = self.path.encode()
            self.send_response(200)
            self.send_header("Connection", "close")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.reply(200, self.path.encode())
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.reply(201, body)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
)PY";

class HttpOverSshTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status st = sshd_.Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    session_ = std::make_unique<SshSession>(sshd_.target());
    const std::string script = sshd_.dir() + "/server.py";
    ASSERT_TRUE(session_->WriteFile(script, kServer, 0644).ok());
    port_ = npuprof::testing::FreeLoopbackPort();
    std::string cmd = "nohup " + BuildCommand({"/usr/bin/python3", script, std::to_string(port_)}) +
                      " >" + ShellQuote(sshd_.dir() + "/server.log") + " 2>&1 </dev/null & echo $!";
    auto r = session_->Exec(cmd, 10s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    server_pid_ = std::stoi(r->stdout_data);
    for (int i = 0; i < 200; ++i) {
      auto h = session_->Http(Get("/ready"));
      if (h.ok() && h->status == 200) return;
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "test HTTP server did not come up";
  }
  void TearDown() override {
    if (server_pid_ > 0) ::kill(server_pid_, SIGKILL);  // we started it; it is on this host
    if (HasFailure()) std::cerr << "sshd log:\n" << sshd_.log() << "\n";
  }
  HttpRequest Get(const std::string& path, std::chrono::milliseconds timeout = 5000ms) {
    HttpRequest r;
    r.remote_port = port_;
    r.path = path;
    r.timeout = timeout;
    return r;
  }

  npuprof::testing::SshdFixture sshd_;
  std::unique_ptr<SshSession> session_;
  int port_ = 0;
  pid_t server_pid_ = -1;
};

TEST_F(HttpOverSshTest, GetPostChunkedBigAnd404) {
  auto r = session_->Http(Get("/hello?x=1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "/hello?x=1");
  EXPECT_GE(r->latency_ms, 0);

  HttpRequest post = Get("/v1/completions");
  post.method = "POST";
  post.body = R"({"prompt":"it's \"quoted\"","max_tokens":8})";
  r = session_->Http(post);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, post.body);

  r = session_->Http(Get("/chunked"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "hello, world");

  r = session_->Http(Get("/big"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body.size(), 1048576u);

  r = session_->Http(Get("/missing"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(session_->handshakes(), 1);
}

TEST_F(HttpOverSshTest, HttpManyRunsConcurrentlyOnOneSession) {
  std::vector<HttpRequest> reqs;
  for (int i = 0; i < 8; ++i) reqs.push_back(Get("/sleep/1/" + std::to_string(i)));
  for (int i = 0; i < 24; ++i) reqs.push_back(Get("/n/" + std::to_string(i)));
  auto t0 = std::chrono::steady_clock::now();
  auto results = session_->HttpMany(reqs, 8);
  auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_EQ(results[i]->status, 200);
    EXPECT_EQ(results[i]->body, reqs[i].path);
  }
  EXPECT_LT(elapsed, 5000ms);  // 8 x 1 s sequentially would take 8 s
  EXPECT_EQ(session_->handshakes(), 1);
  EXPECT_EQ(sshd_.ChildPids().size(), 1u);
}

// A wave keeps one channel per slot (HTTP/1.1 keep-alive): 12 requests at 3
// at once open 3 channels, and each request after a slot's first costs one
// round trip, not two.
TEST_F(HttpOverSshTest, HttpManyKeepsOneChannelPerSlotWhenTheServiceAllowsIt) {
  std::vector<HttpRequest> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back(Get("/k/" + std::to_string(i)));
  SshStatsScope scope;
  auto results = session_->HttpMany(reqs, 3);
  const SshStats got = scope.totals();
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_EQ(results[i]->body, reqs[i].path) << "each answer is its own request's";
  }
  EXPECT_EQ(got.forward_channels, 3);
  // The three channels opened at once (one round trip for their
  // confirmations), then one per request.
  EXPECT_EQ(got.round_trips, 1 + 12);
}

// An answer that says "Connection: close" ends its channel: the next request
// opens one of its own.
TEST_F(HttpOverSshTest, HttpManyOpensAChannelPerRequestWhenTheServiceClosesEach) {
  std::vector<HttpRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(Get("/closing/" + std::to_string(i)));
  SshStatsScope scope;
  auto results = session_->HttpMany(reqs, 2);
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().ToString();
    EXPECT_EQ(results[i]->body, reqs[i].path);
  }
  EXPECT_EQ(scope.totals().forward_channels, 6);
}

// A kept connection the service closes without answering fails that request,
// which is never sent again (the service may have acted on it); the requests
// after it go on.
TEST_F(HttpOverSshTest, AKeptConnectionClosedWithoutAnAnswerFailsThatRequestOnce) {
  auto results = session_->HttpMany({Get("/first"), Get("/drop"), Get("/after")}, 1);
  ASSERT_EQ(results.size(), 3u);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  ASSERT_FALSE(results[1].ok());
  EXPECT_NE(results[1].status().message().find("closed the kept-alive connection before answering"),
            std::string::npos)
      << results[1].status().ToString();
  ASSERT_TRUE(results[2].ok()) << results[2].status().ToString();
  EXPECT_EQ(results[2]->body, "/after");
  auto drops = session_->Http(Get("/drops"));
  ASSERT_TRUE(drops.ok()) << drops.status().ToString();
  EXPECT_EQ(drops->body, "1") << "the dropped request was sent once";
}

TEST_F(HttpOverSshTest, PerRequestTimeoutAndRefusedPort) {
  std::vector<HttpRequest> reqs = {Get("/a"), Get("/sleep/30", 500ms), Get("/b")};
  HttpRequest refused = Get("/");
  refused.remote_port = npuprof::testing::FreeLoopbackPort();
  reqs.push_back(refused);
  auto t0 = std::chrono::steady_clock::now();
  auto results = session_->HttpMany(reqs, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  ASSERT_TRUE(results[0].ok());
  EXPECT_EQ(results[0]->body, "/a");
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].status().code(), Code::kTimeout);
  ASSERT_TRUE(results[2].ok());
  EXPECT_EQ(results[2]->body, "/b");
  ASSERT_FALSE(results[3].ok());
  EXPECT_EQ(results[3].status().code(), Code::kUnavailable);
  EXPECT_EQ(ErrorKindOf(results[3].status()), SshErrorKind::kChannelFailed);
  // Session still healthy.
  auto r = session_->Http(Get("/after"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "/after");
  EXPECT_EQ(session_->handshakes(), 1);
}

TEST_F(HttpOverSshTest, InvalidRequestRejectedBeforeSending) {
  HttpRequest bad = Get("/x\r\nEvil: 1");
  auto r = session_->Http(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace npuprof::ssh
