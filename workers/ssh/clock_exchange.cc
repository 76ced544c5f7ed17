// SshSession::ClockExchange: one exec channel running the clock loop of
// clock_exchange_protocol.h, one line written and one read back per sample.
#include <libssh/libssh.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "workers/ssh/clock_exchange_protocol.h"
#include "workers/ssh/ssh_internal.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {
namespace {

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kStderrShown = 1024;

}  // namespace

Result<std::vector<ClockSample>> SshSession::ClockExchange(int samples, std::chrono::milliseconds timeout,
                                                           ClockMethod prefer) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  if (samples < 1 || samples > 1000) {
    return Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument,
                fmt::format("clock exchange samples must be 1..1000 (got {})", samples));
  }
  const std::string ready = NewNonce();
  auto opened = OpenExecChannelLocked(ClockExchangeScript(ready, prefer, target_.env_script));
  if (!opened.ok()) return opened.status();
  ssh_channel ch = opened.value();
  commands_.fetch_add(1);
  Note(internal::Stat::kCommands);
  Note(internal::Stat::kExecChannels);
  internal::ChannelGuard guard(ch);  // closed on every path

  std::string out, err;
  char buf[4096];
  // Reads at most one buffer of each stream (the caller checks its caps
  // between reads; stderr keeps its last kStderrShown bytes).
  auto read_some = [&]() {
    bool got = false;
    int n = ssh_channel_read_nonblocking(ch, buf, sizeof(buf), 0);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      got = true;
    }
    n = ssh_channel_read_nonblocking(ch, buf, sizeof(buf), 1);
    if (n > 0) {
      err.append(buf, static_cast<size_t>(n));
      if (err.size() > kStderrShown) err.erase(0, err.size() - kStderrShown);
      got = true;
    }
    return got;
  };
  auto failed = [&](SshErrorKind kind, Code code, const std::string& what) {
    const std::string e = err.empty() ? std::string() : fmt::format("; its stderr: '{}'", ShowReplyBytes(err, kStderrShown));
    return Fail(kind, code, fmt::format("clock exchange on {}: {}{}", target_.Endpoint(), what, e));
  };
  // Waits until complete() or the deadline; `waiting_for` names what for errors.
  auto wait_for = [&](auto&& complete, internal::Clock::time_point deadline, const std::string& waiting_for) -> Status {
    while (true) {
      const bool got = read_some();
      if (complete()) return Status::Ok();
      if (!AliveLocked()) {
        guard.Release(/*close=*/false);  // the session (and the channel) is freed
        return CommandLostLocked("during the clock exchange");
      }
      if (ssh_channel_is_eof(ch) != 0 || ssh_channel_is_closed(ch) != 0) {
        if (got) continue;  // what came with the end first
        if (complete()) return Status::Ok();
        const int rc = ssh_channel_get_exit_status(ch);
        return failed(SshErrorKind::kRemoteError, Code::kUnavailable,
                      fmt::format("the clock loop ended (exit status {}) while waiting for {}", rc, waiting_for));
      }
      const auto now = internal::Clock::now();
      if (now >= deadline) {
        return failed(SshErrorKind::kTimeout, Code::kTimeout,
                      fmt::format("no {} within {} ms", waiting_for, timeout.count()));
      }
      if (!got) internal::SessionPump(session_).Pump(deadline - now);
    }
  };

  // Start-up: the login shell, the env script, the loop's ready line.
  std::optional<ClockReady> ready_at;
  Status ready_error;
  Status s = wait_for(
      [&]() {
        auto r = FindClockReady(out, ready);
        if (!r.ok()) {
          ready_error = r.status();
          return true;
        }
        ready_at = *r;
        if (!ready_at && out.size() > kClockPreambleMaxBytes) {
          ready_error = Status::Invalid(fmt::format("{} bytes came before its ready line", out.size()));
          return true;
        }
        return ready_at.has_value();
      },
      internal::Clock::now() + timeout + target_.connect_timeout, "its ready line");
  if (!s.ok()) return s;
  if (!ready_error.ok()) return failed(SshErrorKind::kRemoteError, Code::kInvalidArgument, ready_error.message());
  const ClockMethod method = ready_at->method;
  size_t pos = ready_at->end;

  std::vector<ClockSample> got;
  got.reserve(static_cast<size_t>(samples));
  for (int i = 0; i < samples; ++i) {
    read_some();
    if (out.size() > pos) {
      return failed(SshErrorKind::kRemoteError, Code::kInvalidArgument,
                    fmt::format("the {} loop printed '{}' unasked", ClockMethodName(method),
                                ShowReplyBytes(std::string_view(out).substr(pos))));
    }
    ClockSample sample;
    sample.method = method;
    sample.t0_us = WallMicros();
    if (ssh_channel_write(ch, "\n", 1) != 1) {
      if (!AliveLocked()) {
        guard.Release(/*close=*/false);
        return CommandLostLocked("during the clock exchange");
      }
      return failed(SshErrorKind::kRemoteError, Code::kUnavailable, "cannot write a request to the clock loop");
    }
    size_t nl = std::string::npos;
    s = wait_for(
        [&]() {
          nl = out.find('\n', pos);
          return nl != std::string::npos || out.size() - pos > kClockReplyMaxBytes + 1;
        },
        internal::Clock::now() + timeout, fmt::format("reply {} of {}", i + 1, samples));
    sample.t1_us = WallMicros();
    if (!s.ok()) return s;
    const std::string_view line =
        std::string_view(out).substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    auto ns = ParseClockReply(line, method);
    if (!ns.ok()) return failed(SshErrorKind::kRemoteError, Code::kInvalidArgument, ns.status().message());
    sample.remote_ns = *ns;
    got.push_back(sample);
    pos = nl + 1;
  }
  ssh_channel_send_eof(ch);  // the loop ends at EOF; the guard closes the channel
  Note(internal::Stat::kPayloadIn, static_cast<int64_t>(out.size()));
  Note(internal::Stat::kPayloadOut, samples);
  Note(internal::Stat::kRoundTrips, samples);  // one reply per sample (the ready line follows the exec unasked)
  spdlog::debug("ssh: clock exchange on {}: {} samples by {}", target_.Endpoint(), samples, ClockMethodName(method));
  return got;
}

}  // namespace npuprof::ssh
