// The pure HTTP/1.1 response parser (what SshSession::Http reads from a
// tunnel) on any bytes, as a GET and as a HEAD response, and the request
// writer on fields cut from the same bytes. Promises: a response said to be
// complete parses, and bytes arriving after it change nothing; a parsed
// status is 100..999, a body is never larger than the input and a HEAD
// response has none; an error has a valid UTF-8 message; a request the writer
// accepts has its head ended by the one blank line before the body and every
// line ended by CRLF (no injected header or line).
#include "tests/fuzz/fuzz_targets.h"
#include "workers/ssh/http_over_ssh.h"

namespace npuprof::fuzz {
namespace {

using ssh::HttpResponse;

bool SameResponse(const HttpResponse& a, const HttpResponse& b) {
  return a.status == b.status && a.reason == b.reason && a.headers == b.headers && a.body == b.body;
}

void CheckResponse(std::string_view raw, bool head) {
  const bool complete = ssh::HttpResponseComplete(raw, head);
  const auto r = ssh::ParseHttpResponse(raw, head);
  if (!r.ok()) {
    FUZZ_CHECK(!complete, "complete but not parsed: {}", r.status().message());
    CheckError(r.status(), "ParseHttpResponse");
    return;
  }
  FUZZ_CHECK(r->status >= 100 && r->status <= 999, "status {}", r->status);
  FUZZ_CHECK(r->body.size() <= raw.size(), "a {}-byte body from {} bytes", r->body.size(), raw.size());
  FUZZ_CHECK(!head || r->body.empty(), "a HEAD response with a body");
  if (complete) {
    // The reader stops at completeness; what follows (the next bytes of the
    // channel) must not matter.
    const std::string more = std::string(raw) + "\r\n\r\n0\r\n\r\n" + std::string(raw);
    const auto later = ssh::ParseHttpResponse(more, head);
    FUZZ_CHECK(later.ok(), "bytes after a complete response made it fail: {}", later.status().message());
    FUZZ_CHECK(SameResponse(*r, *later), "bytes after a complete response changed it");
  }
}

// Fields separated by NUL: method, path, header name, header value, body.
void CheckRequest(std::string_view bytes) {
  std::vector<std::string> f;
  size_t start = 0;
  while (f.size() < 4) {
    const size_t nul = bytes.find('\0', start);
    if (nul == std::string_view::npos) return;
    f.emplace_back(bytes.substr(start, nul - start));
    start = nul + 1;
  }
  ssh::HttpRequest req;
  req.remote_port = 8000;
  req.method = f[0];
  req.path = f[1];
  req.headers = {{f[2], f[3]}};
  req.body = std::string(bytes.substr(start));
  const auto wire = ssh::BuildHttpRequest(req);
  if (!wire.ok()) return;
  const std::string& w = *wire;
  FUZZ_CHECK(w.starts_with(req.method + " " + req.path + " HTTP/1.1\r\n"), "request line changed");
  FUZZ_CHECK(w.size() >= req.body.size() + 4 && w.ends_with(req.body), "the body is not at the end");
  const size_t head_end = w.size() - req.body.size() - 4;
  FUZZ_CHECK(w.find("\r\n\r\n") == head_end, "the head ends at byte {}, not {}", w.find("\r\n\r\n"), head_end);
  for (size_t i = 0; i < head_end + 4; ++i) {
    const bool bare_lf = w[i] == '\n' && (i == 0 || w[i - 1] != '\r');
    const bool bare_cr = w[i] == '\r' && (i + 1 >= w.size() || w[i + 1] != '\n');
    FUZZ_CHECK(!bare_lf && !bare_cr && w[i] != '\0', "a bare CR, LF or NUL at byte {} of the head", i);
  }
}

}  // namespace

int FuzzHttpResponse(const uint8_t* data, size_t size) {
  const std::string_view raw = AsText(data, size);
  CheckResponse(raw, false);
  CheckResponse(raw, true);
  CheckRequest(raw);
  return 0;
}

}  // namespace npuprof::fuzz
