// HTTP/1.1 over direct-tcpip channels: request writer, response parser, and
// SshSession::Http / HttpMany (many channels on one session, one thread).
#include "workers/ssh/http_over_ssh.h"

#include <libssh/libssh.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fmt/format.h>

#include "common/text.h"
#include "common/utf8.h"
#include "workers/ssh/ssh_internal.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool HasCtl(std::string_view s, bool allow_space) {
  for (unsigned char c : s) {
    if (c == '\r' || c == '\n' || c == '\0' || (!allow_space && c == ' ')) return true;
  }
  return false;
}

enum class Parse { kComplete, kIncomplete, kError };

// Remote bytes quoted in an error: valid UTF-8, at most 60 bytes.
std::string Quote(std::string_view s) { return TruncateUtf8(s, 60); }

// A number of exactly the digits of `s` (base 10 or 16), nothing else: no
// sign, prefix or space, and it fits 64 bits. strtoull would take "-1",
// "0x10" and " 5", and wrap "-2" to 2^64 - 2.
std::optional<uint64_t> StrictNumber(std::string_view s, int base) {
  if (s.empty()) return std::nullopt;
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

// Decodes a chunked body starting at `body`. Returns kIncomplete if the final
// chunk and trailer section have not arrived yet. A chunk size is checked
// against the bytes that remain, never added to a position (a size near 2^64
// would wrap).
Parse DecodeChunked(std::string_view body, std::string* out, std::string* err) {
  size_t pos = 0;
  out->clear();
  while (true) {
    size_t eol = body.find("\r\n", pos);
    if (eol == std::string_view::npos) return Parse::kIncomplete;
    std::string_view line = body.substr(pos, eol - pos);
    line = Trim(line.substr(0, line.find(';')));
    const auto n = StrictNumber(line, 16);
    if (!n) {
      *err = fmt::format("bad chunk size line '{}'", Quote(body.substr(pos, eol - pos)));
      return Parse::kError;
    }
    pos = eol + 2;
    if (*n == 0) {
      // Trailers end with an empty line.
      while (true) {
        size_t t = body.find("\r\n", pos);
        if (t == std::string_view::npos) return Parse::kIncomplete;
        if (t == pos) return Parse::kComplete;
        pos = t + 2;
      }
    }
    const size_t left = body.size() - pos;
    if (left < *n || left - *n < 2) return Parse::kIncomplete;
    out->append(body.substr(pos, *n));
    pos += *n;
    if (body.substr(pos, 2) != "\r\n") {
      *err = "chunk not followed by CRLF";
      return Parse::kError;
    }
    pos += 2;
  }
}

Parse ParseImpl(std::string_view raw, bool head, bool eof, HttpResponse* out, std::string* err) {
  // The head ends at the first blank line, whichever line ends it uses.
  size_t hdr_end = raw.find("\r\n\r\n");
  size_t body_start = hdr_end + 4;
  if (const size_t lf = raw.find("\n\n"); lf != std::string_view::npos && lf < hdr_end) {
    hdr_end = lf;
    body_start = lf + 2;
  }
  if (hdr_end == std::string_view::npos) {
    if (!eof) return Parse::kIncomplete;
    *err = raw.empty() ? "empty response (connection closed)" : "response headers incomplete";
    return Parse::kError;
  }
  std::string_view head_block = raw.substr(0, hdr_end);
  size_t line_end = head_block.find('\n');
  std::string_view status_line = Trim(head_block.substr(0, line_end));
  // "HTTP/1.x NNN[ reason]", the code exactly three digits.
  const auto code = status_line.size() >= 12 ? StrictNumber(status_line.substr(9, 3), 10) : std::nullopt;
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12 || status_line[8] != ' ' ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    *err = fmt::format("bad status line '{}'", Quote(status_line));
    return Parse::kError;
  }
  if (!code || *code < 100) {
    *err = fmt::format("bad status code '{}'", Quote(status_line.substr(9, 3)));
    return Parse::kError;
  }
  HttpResponse r;
  r.status = static_cast<int>(*code);
  if (status_line.size() > 13) r.reason = std::string(status_line.substr(13));
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head_block.substr(line_end + 1);
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = Trim(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.empty()) continue;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      *err = fmt::format("bad header line '{}'", Quote(line));
      return Parse::kError;
    }
    r.headers.emplace_back(std::string(Trim(line.substr(0, colon))),
                           std::string(Trim(line.substr(colon + 1))));
  }
  std::string_view body = raw.substr(body_start);
  bool no_body = head || r.status < 200 || r.status == 204 || r.status == 304;
  auto te = r.Header("Transfer-Encoding");
  auto cl = r.Header("Content-Length");
  if (no_body) {
    // nothing
  } else if (te && te->find("chunked") != std::string::npos) {
    Parse p = DecodeChunked(body, &r.body, err);
    if (p == Parse::kError) return p;
    if (p == Parse::kIncomplete) {
      if (!eof) return p;
      *err = "chunked body truncated";
      return Parse::kError;
    }
  } else if (cl) {
    const auto n = StrictNumber(*cl, 10);
    if (!n) {
      *err = fmt::format("bad Content-Length '{}'", Quote(*cl));
      return Parse::kError;
    }
    if (body.size() < *n) {
      if (!eof) return Parse::kIncomplete;
      *err = fmt::format("body truncated: {} of {} bytes", body.size(), *n);
      return Parse::kError;
    }
    r.body = std::string(body.substr(0, *n));
  } else {
    if (!eof) return Parse::kIncomplete;  // delimited by connection close
    r.body = std::string(body);
  }
  *out = std::move(r);
  return Parse::kComplete;
}

}  // namespace

std::optional<std::string> HttpResponse::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return std::nullopt;
}

Result<std::string> BuildHttpRequest(const HttpRequest& req, bool keep_alive) {
  if (req.method.empty() || HasCtl(req.method, false)) {
    return Status::Invalid(fmt::format("invalid HTTP method '{}'", req.method));
  }
  if (req.path.empty() || req.path.front() != '/' || HasCtl(req.path, false)) {
    return Status::Invalid("invalid HTTP path: must start with '/' and contain no spaces, CR or LF");
  }
  if (req.remote_port <= 0 || req.remote_port > 65535) {
    return Status::Invalid(fmt::format("invalid remote_port {}", req.remote_port));
  }
  std::string out = fmt::format("{} {} HTTP/1.1\r\nHost: {}:{}\r\nConnection: {}\r\n", req.method, req.path,
                                req.remote_host, req.remote_port, keep_alive ? "keep-alive" : "close");
  bool has_ct = false;
  for (const auto& [k, v] : req.headers) {
    if (k.empty() || HasCtl(k, false) || k.find(':') != std::string::npos || HasCtl(v, true)) {
      return Status::Invalid(fmt::format("invalid HTTP header '{}'", k));
    }
    if (IEquals(k, "Host") || IEquals(k, "Connection") || IEquals(k, "Content-Length")) continue;
    if (IEquals(k, "Content-Type")) has_ct = true;
    out += fmt::format("{}: {}\r\n", k, v);
  }
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    if (!has_ct && !req.body.empty()) out += "Content-Type: application/json\r\n";
    out += fmt::format("Content-Length: {}\r\n", req.body.size());
  }
  out += "\r\n";
  out += req.body;
  return out;
}

bool HttpResponseComplete(std::string_view raw, bool head_request) {
  HttpResponse r;
  std::string err;
  return ParseImpl(raw, head_request, false, &r, &err) == Parse::kComplete;
}

bool HttpConnectionReusable(std::string_view raw, const HttpResponse& parsed) {
  if (raw.substr(0, 9) != "HTTP/1.1 ") return false;
  for (const auto& [k, v] : parsed.headers)
    if (IEquals(k, "Connection") && IEquals(Trim(v), "close")) return false;
  return true;
}

Result<HttpResponse> ParseHttpResponse(std::string_view raw, bool head_request) {
  HttpResponse r;
  std::string err;
  if (ParseImpl(raw, head_request, true, &r, &err) != Parse::kComplete) {
    return Status::Corruption("malformed HTTP response: " + err);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Transport

Result<ssh_channel_struct*> SshSession::OpenForwardLocked(const HttpRequest& req) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status s = ConnectLocked();
    if (!s.ok()) return s;
    ssh_channel ch = ssh_channel_new(session_);
    if (ch != nullptr && ssh_channel_open_forward(ch, req.remote_host.c_str(), req.remote_port,
                                                  "127.0.0.1", 0) == SSH_OK) {
      Note(internal::Stat::kForwardChannels);
      Note(internal::Stat::kRoundTrips, 2);  // the open's confirmation, then the request's response
      return ch;
    }
    std::string err = LibError();
    if (ch != nullptr) ssh_channel_free(ch);
    if (AliveLocked()) {
      return Fail(SshErrorKind::kChannelFailed, Code::kUnavailable,
                  fmt::format("cannot open a tunnel to {}:{} on {} (is the service listening?): {}",
                              req.remote_host, req.remote_port, target_.Endpoint(), err));
    }
    DisconnectLocked();  // nothing was sent yet: reconnect once
  }
  return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
              fmt::format("connection to {} dropped twice while opening a tunnel",
                          target_.Endpoint()));
}

Result<HttpResponse> SshSession::Http(const HttpRequest& req) {
  return std::move(HttpMany({req}, 1).front());
}

std::vector<Result<HttpResponse>> SshSession::HttpMany(const std::vector<HttpRequest>& reqs,
                                                       int concurrency) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  std::vector<Result<HttpResponse>> results(reqs.size(),
                                            Result<HttpResponse>(Status::Internal("not run")));
  struct Slot {
    size_t idx;
    ssh_channel ch;
    std::string raw;
    internal::Clock::time_point start, deadline;
    bool keep_alive = false;  // the request asked to keep the connection for the next one
    bool reused = false;      // sent on a channel a response before it came on
  };
  std::vector<Slot> active;
  size_t next = 0;
  const size_t limit = static_cast<size_t>(std::max(1, concurrency));
  // The request after `next` goes to the same place: worth keeping a channel for.
  const auto more_to = [&](size_t after, const HttpRequest& req) {
    return after < reqs.size() && reqs[after].remote_host == req.remote_host &&
           reqs[after].remote_port == req.remote_port;
  };
  auto finish = [&](Slot& s, Result<HttpResponse> r, bool free_channel) {
    if (free_channel) {
      if (ssh_channel_is_closed(s.ch) == 0) ssh_channel_close(s.ch);
      ssh_channel_free(s.ch);
    }
    s.ch = nullptr;
    if (r.ok()) {
      r->latency_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          internal::Clock::now() - s.start).count();
    }
    results[s.idx] = std::move(r);
  };
  std::vector<ssh_channel> opened(reqs.size(), nullptr);  // channels opened at once, not used yet
  auto lose_all = [&]() {
    std::fill(opened.begin(), opened.end(), nullptr);  // the connection's end frees them
    std::string err = LibError();
    for (auto& s : active) {
      finish(s, Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
                     fmt::format("connection to {} lost during HTTP request: {}",
                                 target_.Endpoint(), err)),
             /*free_channel=*/false);
    }
    active.clear();
    DisconnectLocked();
  };
  // Sends request i on the slot's channel (open, or kept from the response
  // before); false when it could not be sent (the slot is then finished).
  auto send = [&](Slot& slot, size_t i) -> bool {
    const HttpRequest& req = reqs[i];
    slot.idx = i;
    slot.raw.clear();
    slot.start = internal::Clock::now();
    slot.deadline = slot.start + req.timeout;
    slot.keep_alive = more_to(next, req);
    auto wire = BuildHttpRequest(req, slot.keep_alive);
    if (!wire.ok()) {
      finish(slot, Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument, wire.status().message()), true);
      return false;
    }
    const std::string& w = wire.value();
    if (ssh_channel_write(slot.ch, w.data(), static_cast<uint32_t>(w.size())) == SSH_ERROR) {
      if (!AliveLocked()) {
        active.push_back(std::move(slot));
        lose_all();
        return false;
      }
      finish(slot, Fail(SshErrorKind::kChannelFailed, Code::kUnavailable,
                        "cannot send HTTP request: " + LibError()), true);
      return false;
    }
    Note(internal::Stat::kPayloadOut, static_cast<int64_t>(w.size()));
    return true;
  };

  // The first slots' channels are opened at once (libssh answers SSH_AGAIN
  // on a non-blocking session, and the confirmations come together): one
  // round trip for all of them, where opening them one after another cost
  // one each. A channel that did not open here is opened the usual way
  // below, which names the cause (and reconnects once).
  if (std::min(limit, reqs.size()) > 1 && ConnectLocked().ok()) {
    struct Pending {
      size_t i;
      ssh_channel ch;
    };
    std::vector<Pending> pending;
    auto deadline = internal::Clock::time_point::max();
    const auto open = [&](const Pending& p) {
      const HttpRequest& req = reqs[p.i];
      return ssh_channel_open_forward(p.ch, req.remote_host.c_str(), req.remote_port, "127.0.0.1", 0);
    };
    ssh_set_blocking(session_, 0);
    for (size_t i = 0; i < std::min(limit, reqs.size()); ++i) {
      if (!BuildHttpRequest(reqs[i]).ok()) continue;
      Pending p{i, ssh_channel_new(session_)};
      if (p.ch == nullptr) break;
      deadline = std::min(deadline, internal::Clock::now() + reqs[i].timeout);
      const int rc = open(p);
      if (rc == SSH_OK) opened[i] = p.ch;
      else if (rc == SSH_AGAIN) pending.push_back(p);
      else ssh_channel_free(p.ch);
    }
    while (!pending.empty() && internal::Clock::now() < deadline && AliveLocked()) {
      internal::SessionPump(session_).Pump(deadline - internal::Clock::now());
      std::erase_if(pending, [&](const Pending& p) {
        const int rc = open(p);
        if (rc == SSH_AGAIN) return false;
        if (rc == SSH_OK) opened[p.i] = p.ch;
        else ssh_channel_free(p.ch);
        return true;
      });
    }
    for (const Pending& p : pending) ssh_channel_free(p.ch);  // not confirmed in time: opened below instead
    ssh_set_blocking(session_, 1);
    const auto n = std::count_if(opened.begin(), opened.end(), [](ssh_channel c) { return c != nullptr; });
    if (n > 0) {
      Note(internal::Stat::kForwardChannels, n);
      Note(internal::Stat::kRoundTrips);  // the opens' confirmations, together
    }
  }

  char buf[32768];
  while (next < reqs.size() || !active.empty()) {
    while (active.size() < limit && next < reqs.size()) {
      const size_t i = next++;
      const HttpRequest& req = reqs[i];
      if (auto wire = BuildHttpRequest(req); !wire.ok()) {
        results[i] = Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument, wire.status().message());
        continue;
      }
      if (opened[i] != nullptr) {
        Note(internal::Stat::kRoundTrips);  // the request's response, on a channel opened above
        Slot slot{i, opened[i], {}, {}, {}};
        opened[i] = nullptr;
        if (send(slot, i)) active.push_back(std::move(slot));
        continue;
      }
      // OpenForwardLocked may reconnect, which would free channels opened
      // above: give any left back first.
      for (ssh_channel& left : opened) {
        if (left == nullptr) continue;
        ssh_channel_close(left);
        ssh_channel_free(left);
        left = nullptr;
      }
      auto ch = OpenForwardLocked(req);
      if (!ch.ok()) {
        results[i] = ch.status();
        if (ErrorKindOf(ch.status()) != SshErrorKind::kChannelFailed) {
          // No usable connection (unreachable, auth, host key): fail the
          // requests not yet started instead of reconnecting for each.
          for (; next < reqs.size(); ++next) results[next] = ch.status();
        }
        continue;
      }
      Slot slot{i, ch.value(), {}, {}, {}};
      if (send(slot, i)) active.push_back(std::move(slot));
    }
    if (active.empty()) continue;

    bool progressed = false;
    auto now = internal::Clock::now();
    auto earliest = active.front().deadline;
    std::vector<Slot> kept;  // channels whose response allows the next request on them
    for (auto& s : active) {
      bool eof = false;
      while (true) {
        int n = ssh_channel_read_nonblocking(s.ch, buf, sizeof(buf), 0);
        if (n > 0) {
          s.raw.append(buf, static_cast<size_t>(n));
          Note(internal::Stat::kPayloadIn, n);
          progressed = true;
          continue;
        }
        if (n == SSH_ERROR || ssh_channel_is_eof(s.ch) != 0 || ssh_channel_is_closed(s.ch) != 0) {
          eof = true;
        }
        break;
      }
      if (!AliveLocked()) break;
      const HttpRequest& req = reqs[s.idx];
      const bool head = req.method == "HEAD";
      const bool complete = !eof && HttpResponseComplete(s.raw, head);
      if (s.raw.size() > req.max_response_bytes) {
        finish(s, Fail(SshErrorKind::kRemoteError, Code::kIoError,
                       fmt::format("HTTP {} {} to port {}: the response is larger than {} bytes",
                                   req.method, req.path, req.remote_port, req.max_response_bytes)),
               true);
        progressed = true;
      } else if (eof && s.reused && s.raw.empty()) {
        // The service ended the kept connection without an answer: whether it
        // read the request cannot be known, so it is not sent again.
        finish(s, Fail(SshErrorKind::kRemoteError, Code::kUnavailable,
                       fmt::format("HTTP {} {} to port {}: the service closed the kept-alive connection before "
                                   "answering (the request was not sent again: it may have been processed)",
                                   req.method, req.path, req.remote_port)),
               true);
        progressed = true;
      } else if (eof || complete) {
        auto parsed = ParseHttpResponse(s.raw, head);
        const bool keep = complete && parsed.ok() && s.keep_alive && HttpConnectionReusable(s.raw, *parsed) &&
                          more_to(next, req);
        if (keep) {
          Slot again{s.idx, s.ch, {}, {}, {}, false, true};
          finish(s, std::move(parsed), /*free_channel=*/false);
          kept.push_back(again);
        } else {
          finish(s, parsed.ok() ? std::move(parsed)
                                : Result<HttpResponse>(Fail(SshErrorKind::kRemoteError,
                                                            Code::kCorruption,
                                                            parsed.status().message())),
                 true);
        }
        progressed = true;
      } else if (now >= s.deadline) {
        finish(s, Fail(SshErrorKind::kTimeout, Code::kTimeout,
                       fmt::format("HTTP {} {} to port {} timed out after {} ms",
                                   req.method, req.path, req.remote_port, req.timeout.count())),
               true);
        progressed = true;
      } else {
        earliest = std::min(earliest, s.deadline);
      }
    }
    if (!AliveLocked()) {
      for (Slot& k : kept) active.push_back(k);  // their channels are lost with the rest
      std::erase_if(active, [](const Slot& s) { return s.ch == nullptr; });
      lose_all();
      continue;
    }
    std::erase_if(active, [](const Slot& s) { return s.ch == nullptr; });
    for (Slot& k : kept) {
      if (next >= reqs.size()) {  // nothing left for it after all
        ssh_channel_close(k.ch);
        ssh_channel_free(k.ch);
        continue;
      }
      const size_t i = next++;
      Note(internal::Stat::kRoundTrips);  // the request's response, on a channel already open
      if (send(k, i)) active.push_back(std::move(k));
    }
    if (!progressed && !active.empty()) {
      internal::SessionPump(session_).Pump(earliest - internal::Clock::now());
    }
  }
  for (ssh_channel ch : opened) {  // opened for a request that failed before it was sent
    if (ch == nullptr) continue;
    ssh_channel_close(ch);
    ssh_channel_free(ch);
  }
  return results;
}

}  // namespace npuprof::ssh
