// Pure HTTP request writer / response parser.
#include <gtest/gtest.h>

#include "workers/ssh/http_over_ssh.h"

namespace npuprof::ssh {
namespace {

TEST(HttpParse, ContentLength) {
  std::string raw = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello";
  EXPECT_TRUE(HttpResponseComplete(raw));
  EXPECT_FALSE(HttpResponseComplete(raw.substr(0, raw.size() - 1)));
  auto r = ParseHttpResponse(raw);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->reason, "OK");
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->Header("content-type").value_or(""), "text/plain");
  EXPECT_FALSE(ParseHttpResponse(raw.substr(0, raw.size() - 2)).ok());  // truncated
}

TEST(HttpParse, Chunked) {
  std::string raw =
      "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n";
  EXPECT_TRUE(HttpResponseComplete(raw));
  EXPECT_FALSE(HttpResponseComplete(raw.substr(0, raw.size() - 2)));
  auto r = ParseHttpResponse(raw);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "hello, world");
  EXPECT_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").ok());
}

TEST(HttpParse, EofDelimitedAndNoBody) {
  std::string raw = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil close";
  EXPECT_FALSE(HttpResponseComplete(raw));
  auto r = ParseHttpResponse(raw);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "until close");
  EXPECT_TRUE(HttpResponseComplete("HTTP/1.1 204 No Content\r\n\r\n"));
  EXPECT_TRUE(HttpResponseComplete("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true));
}

TEST(HttpParse, Malformed) {
  EXPECT_EQ(ParseHttpResponse("").status().code(), Code::kCorruption);
  EXPECT_FALSE(ParseHttpResponse("garbage\r\n\r\n").ok());
  EXPECT_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\nnocolon\r\n\r\n").ok());
}

TEST(HttpRequestWriter, BuildsAndRejectsInjection) {
  HttpRequest req;
  req.remote_port = 8000;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"X-Test", "1"}, {"Connection", "keep-alive"}};
  req.body = "{\"a\":1}";
  auto w = BuildHttpRequest(req);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.value(),
            "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nConnection: close\r\n"
            "X-Test: 1\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
  req.path = "/x HTTP/1.1\r\nEvil: 1";
  EXPECT_FALSE(BuildHttpRequest(req).ok());
  req.path = "/";
  req.headers = {{"X", "a\r\nEvil: 1"}};
  EXPECT_FALSE(BuildHttpRequest(req).ok());
  req.headers = {};
  req.remote_port = 0;
  EXPECT_FALSE(BuildHttpRequest(req).ok());
}

}  // namespace
}  // namespace npuprof::ssh
