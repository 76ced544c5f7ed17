// SshSession's command shell: one long-lived remote shell per connection that
// runs framed commands (protocol and semantics: command_shell_protocol.h).
// Saves a channel open and a login-shell start-up (rc files) per command.
#include <libssh/libssh.h>

#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "workers/ssh/command_shell_protocol.h"
#include "workers/ssh/env_script_protocol.h"
#include "workers/ssh/output_cap.h"
#include "workers/ssh/ssh_internal.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::ssh {

std::string SshSession::NewNonce() {
  if (nonce_state_[0] == 0 && nonce_state_[1] == 0) {
    std::random_device rd;
    nonce_state_[0] = (uint64_t{rd()} << 32) ^ rd();
    nonce_state_[1] = (uint64_t{rd()} << 32) ^ rd();
  }
  // splitmix64 steps of a random seed: unpredictable to the remote side,
  // which never sees the seed, and never repeating within a session.
  auto next = [](uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return fmt::format("{:016x}{:016x}", next(nonce_state_[0]), next(nonce_state_[1]));
}

void SshSession::CloseShellLocked() {
  if (shell_ != nullptr) {
    internal::ChannelGuard guard(shell_);  // close + free
    shell_ = nullptr;
  }
  shell_pid_ = 0;
}

Status SshSession::EnsureShellLocked(internal::Clock::time_point deadline) {
  if (shell_ != nullptr && AliveLocked()) {
    // Handle what already arrived (an EOF or CLOSE of a shell that ended).
    internal::SessionPump(session_).Pump(std::chrono::milliseconds(0));
  }
  if (shell_ != nullptr && AliveLocked() && ssh_channel_is_open(shell_) != 0 &&
      ssh_channel_is_eof(shell_) == 0) {
    return Status::Ok();
  }
  CloseShellLocked();
  const std::string ready = NewNonce();
  auto opened = OpenExecChannelLocked(CommandShellDriver(ready, target_.env_script));  // connects if needed
  if (!opened.ok()) return opened.status();
  Note(internal::Stat::kShellChannels);
  ssh_channel ch = opened.value();
  // The login shell runs its rc files, then the driver announces itself.
  const auto ready_by = std::min(deadline, internal::Clock::now() + target_.connect_timeout);
  std::string out;
  char buf[4096];
  while (true) {
    int n = ssh_channel_read_nonblocking(ch, buf, sizeof(buf), 0);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
      if (auto failed = FindEnvScriptFailure(out, ready)) {
        // The machine's env script failed: no command can run with its
        // environment, and a per-command channel would meet it again.
        internal::ChannelGuard guard(ch);
        return Fail(SshErrorKind::kEnvScriptFailed, Code::kFailedPrecondition,
                    DescribeEnvScriptFailure(*failed, target_.env_script, target_.Endpoint()));
      }
      if (auto pid = FindShellReady(out, ready)) {
        shell_ = ch;
        shell_pid_ = *pid;
        spdlog::debug("ssh: command shell on {} ready (pid {})", target_.Endpoint(), *pid);
        return Status::Ok();
      }
      continue;
    }
    internal::DrainStream(ch, 1);  // rc-file noise on stderr must not fill the window
    if (!AliveLocked()) {
      DisconnectLocked();  // frees ch with the session
      return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
                  fmt::format("connection to {} lost while starting the command shell",
                              target_.Endpoint()));
    }
    if (n == SSH_ERROR || ssh_channel_is_eof(ch) != 0 || ssh_channel_is_closed(ch) != 0) {
      // What arrived with the end (draining stderr may have read it).
      for (int k; (k = ssh_channel_read_nonblocking(ch, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(k));
      internal::ChannelGuard guard(ch);
      if (auto failed = FindEnvScriptFailure(out, ready))
        return Fail(SshErrorKind::kEnvScriptFailed, Code::kFailedPrecondition,
                    DescribeEnvScriptFailure(*failed, target_.env_script, target_.Endpoint()));
      // The login shell could not run the driver (not a POSIX shell?): give
      // up on the command shell for this session.
      shell_unsupported_ = true;
      spdlog::warn("ssh: {}: the login shell did not start npuprof's command shell; every "
                   "command gets its own channel (output: {:.200})",
                   target_.Endpoint(), out);
      return Fail(SshErrorKind::kChannelFailed, Code::kUnavailable, "command shell unsupported");
    }
    const auto now = internal::Clock::now();
    if (now >= ready_by) {
      internal::ChannelGuard guard(ch);
      return Fail(SshErrorKind::kTimeout, Code::kTimeout,
                  fmt::format("the command shell on {} did not start in time", target_.Endpoint()));
    }
    internal::SessionPump(session_).Pump(ready_by - now);
  }
}

void SshSession::KillShellCommandLocked() {
  if (shell_pid_ > 0) {
    auto r = ExecOnChannelLocked(KillCommandTreeScript(shell_pid_), std::chrono::seconds(5), {},
                                 OutputCap::kMinCap);
    if (!r.ok()) spdlog::warn("ssh: {}: could not stop a timed-out command: {}", target_.Endpoint(),
                              r.status().ToString());
  }
  if (shell_ != nullptr) ssh_channel_request_send_signal(shell_, "TERM");
  CloseShellLocked();
}

std::optional<Result<ExecResult>> SshSession::ExecInShellLocked(const std::string& command,
                                                                std::chrono::milliseconds timeout,
                                                                size_t output_cap) {
  const auto start = internal::Clock::now();
  const auto deadline = start + timeout;
  const std::string nonce = NewNonce();
  const std::string frame = CommandShellFrame(command, nonce);

  // Start the shell and hand it the frame. A failure here cannot have run the
  // command (the driver refuses a frame cut short), so the connection is
  // re-established once, as for a channel that failed to open.
  bool sent = false;
  for (int attempt = 0; attempt < 2 && !sent; ++attempt) {
    Status s = EnsureShellLocked(deadline);
    if (!s.ok()) {
      if (shell_unsupported_) return std::nullopt;  // fall back to a channel per command
      return Result<ExecResult>(s);
    }
    // Late output of an earlier command's background process: dropped.
    for (int is_stderr = 0; is_stderr < 2; ++is_stderr) internal::DrainStream(shell_, is_stderr);
    sent = internal::WriteAll(shell_, frame) == frame.size();
    if (!sent) {
      spdlog::info("ssh: command shell on {} gone before a command ({}); restarting it",
                   target_.Endpoint(), LibError());
      if (AliveLocked()) CloseShellLocked(); else DisconnectLocked();
    }
  }
  if (!sent) {
    return Result<ExecResult>(Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
                                   fmt::format("cannot hand a command to the command shell on {}",
                                               target_.Endpoint())));
  }
  commands_.fetch_add(1);
  Note(internal::Stat::kCommands);
  Note(internal::Stat::kRoundTrips);  // the frame out, its end markers back

  ExecResult out;
  OutputCap out_cap(output_cap), err_cap(output_cap);  // keep >= MaxMarkerSize at the end
  std::optional<StdoutMarker> out_end;
  std::optional<size_t> err_end;
  const size_t back = MaxMarkerSize(nonce);
  char buf[32768];
  auto lost = [&](const std::string& what) { return Result<ExecResult>(CommandLostLocked(what)); };
  while (!(out_end && err_end)) {
    bool got = false;
    for (int is_stderr = 0; is_stderr < 2; ++is_stderr) {
      std::string& acc = is_stderr ? out.stderr_data : out.stdout_data;
      if (is_stderr ? err_end.has_value() : out_end.has_value()) {
        internal::DrainStream(shell_, is_stderr);  // stray bytes after the marker (a background process)
        continue;
      }
      int n = ssh_channel_read_nonblocking(shell_, buf, sizeof(buf), is_stderr);
      if (n > 0) {
        const size_t from = acc.size() > back ? acc.size() - back : 0;
        acc.append(buf, static_cast<size_t>(n));
        got = true;
        if (is_stderr) {
          err_end = FindStderrMarker(acc, nonce, from);
          if (!err_end) err_cap.Trim(acc);
        } else {
          out_end = FindStdoutMarker(acc, nonce, from);
          if (!out_end) out_cap.Trim(acc);
        }
      } else if (n == SSH_ERROR && !AliveLocked()) {
        return lost("mid-command");
      }
    }
    if (out_end && err_end) break;
    if (!AliveLocked()) return lost("mid-command");
    if (ssh_channel_is_eof(shell_) != 0 || ssh_channel_is_closed(shell_) != 0) {
      CloseShellLocked();
      return Result<ExecResult>(Fail(
          SshErrorKind::kConnectionLost, Code::kUnavailable,
          fmt::format("the command shell on {} ended mid-command; the command may or may not "
                      "have run",
                      target_.Endpoint())));
    }
    const auto now = internal::Clock::now();
    if (now >= deadline) {
      out.timed_out = true;
      KillShellCommandLocked();
      break;
    }
    if (!got) internal::SessionPump(session_).Pump(deadline - now);
  }
  if (out_end) {
    if (!out.timed_out) out.exit_status = out_end->exit_status;
    out.stdout_data.resize(out_end->begin);
  }
  if (err_end) out.stderr_data.resize(*err_end);
  Note(internal::Stat::kPayloadIn,
       static_cast<int64_t>(out.stdout_data.size() + out.stderr_data.size()));
  out.stdout_omitted = out_cap.Finish(out.stdout_data);
  out.stderr_omitted = err_cap.Finish(out.stderr_data);
  out.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      internal::Clock::now() - start);
  if (out.timed_out) last_kind_ = SshErrorKind::kTimeout;
  return Result<ExecResult>(std::move(out));
}

}  // namespace npuprof::ssh
