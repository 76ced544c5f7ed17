// npuprof's on-target HTTP client (workers/profiling/target_http_client.h),
// run locally with python3 -I -S against raw answers a test server in the
// same program writes byte for byte: each answer's form (Content-Length,
// chunks, to the close, an interim 100, no body) and each way an answer can
// be wrong (cut short, over the limit, not HTTP) gives the client's result
// or its error, and the server records the request the client sent.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/ssh/local_shell.h"
#include "workers/profiling/target_http_client.h"

namespace npuprof::profiling {
namespace {

using nlohmann::json;

// A one-connection-at-a-time server thread answering the i-th connection
// with ANSWERS[i]; each case prints one line of JSON: the client's result
// (status, reason, body, size) or its error, and the request it sent.
constexpr const char* kHarness = R"PY(
import json, socket, threading
ANSWERS = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6; x=1\r\n world\r\n0\r\n\r\n",
    b"HTTP/1.0 404 Not Found\r\n\r\n" + b"x" * 200000,
    b"HTTP/1.0 404 Not Found\r\n\r\n" + b"x" * 200000,
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
    b"garbage\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
]
CASES = [("GET", b"", "", 100, 1000), ("POST", b'{"a":1}', "application/json", 3, 1000),
         ("GET", b"", "", 10, 1 << 20), ("GET", b"", "", 10, 1000), ("GET", b"", "", 10, 1000),
         ("GET", b"", "", 10, 1000), ("DELETE", b"", "", 10, 1000), ("GET", b"", "", 10, 1000)]
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(8)
port = srv.getsockname()[1]
seen = []
def serve():
    for a in ANSWERS:
        c, _ = srv.accept()
        data = b""
        while b"\r\n\r\n" not in data:
            data += c.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                while len(rest) < int(line.split(b":")[1]):
                    rest += c.recv(65536)
        seen.append((head + b"\r\n\r\n" + rest).decode("latin-1"))
        c.sendall(a)
        c.close()
t = threading.Thread(target=serve)
t.daemon = True
t.start()
for i, (m, body, ctype, keep, limit) in enumerate(CASES):
    try:
        s, r, b, n = npuprof_http(port, m, "/p%d" % i, body, ctype, 10, keep, limit)
        out = {"status": s, "reason": r, "body": b.decode("latin-1"), "size": n}
    except Exception as e:
        out = {"error": type(e).__name__ + ": " + str(e)}
    out["request"] = seen[i] if i < len(seen) else ""
    print(json.dumps(out))
)PY";

std::vector<json> RunHarness() {
  const auto r = ssh::testing::RunLocalArgv(
      {"python3", "-I", "-S", "-c", std::string(kTargetHttpClientPy) + kHarness}, "");
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<json> out;
  size_t at = 0;
  while (at < r.out.size()) {
    const size_t nl = r.out.find('\n', at);
    out.push_back(json::parse(r.out.substr(at, nl - at)));
    at = nl == std::string::npos ? r.out.size() : nl + 1;
  }
  return out;
}

TEST(TargetHttpClient, ReadsEveryFormOfAnswerAndRefusesWhatIsWrongByName) {
  const std::vector<json> c = RunHarness();
  ASSERT_EQ(c.size(), 8u);
  // Content-Length.
  EXPECT_EQ(c[0]["status"], 200);
  EXPECT_EQ(c[0]["reason"], "OK");
  EXPECT_EQ(c[0]["body"], "hello");
  EXPECT_EQ(c[0]["size"], 5);
  const std::string get = c[0]["request"];
  EXPECT_EQ(get.rfind("GET /p0 HTTP/1.1\r\n", 0), 0u) << get;
  EXPECT_NE(get.find("\r\nConnection: close\r\n"), std::string::npos) << get;
  EXPECT_EQ(get.find("Content-Length"), std::string::npos) << "no body, no length on a GET: " << get;
  // Chunks joined, the kept part cut at `keep`, the size whole; the request's body and type sent.
  EXPECT_EQ(c[1]["status"], 201);
  EXPECT_EQ(c[1]["body"], "hel");
  EXPECT_EQ(c[1]["size"], 11);
  const std::string post = c[1]["request"];
  EXPECT_NE(post.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << post;
  EXPECT_NE(post.find("\r\nContent-Length: 7\r\n\r\n{\"a\":1}"), std::string::npos) << post;
  // To the close: counted whole under the limit, refused over it.
  EXPECT_EQ(c[2]["status"], 404);
  EXPECT_EQ(c[2]["size"], 200000);
  EXPECT_EQ(c[2]["body"], std::string(10, 'x'));
  EXPECT_EQ(c[3]["error"], "ValueError: the answer is larger than 1000 bytes");
  // An interim 100 passed over; a body shorter than its Content-Length is an error.
  EXPECT_EQ(c[4]["error"], "ValueError: the answer ended after 5 of its 10 bytes");
  EXPECT_EQ(c[5]["error"].get<std::string>().rfind("ValueError: not an HTTP answer", 0), 0u) << c[5].dump();
  // No body (204) after a 100; a method with no body still says its length.
  EXPECT_EQ(c[6]["status"], 204);
  EXPECT_EQ(c[6]["size"], 0);
  EXPECT_NE(c[6]["request"].get<std::string>().find("\r\nContent-Length: 0\r\n"), std::string::npos);
  // Chunks cut short.
  EXPECT_EQ(c[7]["error"], "ValueError: the answer ended inside a chunk");
}

}  // namespace
}  // namespace npuprof::profiling
