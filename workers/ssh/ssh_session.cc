// SshSession: connection, host key verification, authentication and Exec.
// SFTP lives in sftp_ops.cc, HTTP in http_over_ssh.cc.
#include "workers/ssh/ssh_session.h"

#include <libssh/libssh.h>
#include <poll.h>

#include <algorithm>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "workers/ssh/output_cap.h"
#include "workers/ssh/ssh_internal.h"

namespace npuprof::ssh {

std::string SshTarget::Endpoint() const { return fmt::format("{}@{}:{}", user, host, port); }

const char* SshErrorKindName(SshErrorKind k) {
  switch (k) {
    case SshErrorKind::kNone: return "none";
    case SshErrorKind::kUnreachable: return "unreachable";
    case SshErrorKind::kAuthFailed: return "auth_failed";
    case SshErrorKind::kHostKeyUnknown: return "host_key_unknown";
    case SshErrorKind::kHostKeyMismatch: return "host_key_mismatch";
    case SshErrorKind::kTimeout: return "timeout";
    case SshErrorKind::kChannelFailed: return "channel_failed";
    case SshErrorKind::kConnectionLost: return "connection_lost";
    case SshErrorKind::kRemoteError: return "remote_error";
    case SshErrorKind::kInvalidInput: return "invalid_input";
    case SshErrorKind::kSubsystemRefused: return "subsystem_refused";
    case SshErrorKind::kToolMissing: return "tool_missing";
    case SshErrorKind::kEnvScriptFailed: return "env_script_failed";
    case SshErrorKind::kRemoteDiskFull: return "remote_disk_full";
  }
  return "none";
}

bool IsPermanent(SshErrorKind k) {
  switch (k) {
    case SshErrorKind::kAuthFailed:
    case SshErrorKind::kHostKeyUnknown:
    case SshErrorKind::kHostKeyMismatch:
    case SshErrorKind::kSubsystemRefused:
    case SshErrorKind::kToolMissing:
    case SshErrorKind::kInvalidInput:
    case SshErrorKind::kEnvScriptFailed:
    case SshErrorKind::kRemoteDiskFull:
      return true;
    default:
      return false;
  }
}

SshErrorKind ErrorKindOf(const Status& s) {
  if (s.ok()) return SshErrorKind::kNone;
  const std::string& m = s.message();
  for (int i = 1; i <= static_cast<int>(SshErrorKind::kLast); ++i) {
    auto k = static_cast<SshErrorKind>(i);
    std::string prefix = std::string(SshErrorKindName(k)) + ": ";
    if (m.rfind(prefix, 0) == 0) return k;
  }
  return SshErrorKind::kNone;
}

SshSession::SshSession(SshTarget target)
    : target_(std::move(target)), creator_sink_(internal::CurrentSink()) {}

void SshSession::Note(internal::Stat what, int64_t n) {
  internal::Count(what, n, internal::SessionSink(this, creator_sink_.get()));
}

SshSession::~SshSession() {
  std::lock_guard<std::mutex> lock(mu_);
  DisconnectLocked();
}

Status SshSession::Fail(SshErrorKind kind, Code code, const std::string& msg) {
  last_kind_ = kind;
  return Status(code, fmt::format("{}: {}", SshErrorKindName(kind), msg));
}

Status SshSession::CommandLostLocked(const std::string& what) {
  const std::string err = LibError();
  DisconnectLocked();
  return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
              fmt::format("connection to {} lost {} ({}); the command may or may not have run",
                          target_.Endpoint(), what, err));
}

std::string SshSession::LibError() {
  return session_ != nullptr ? std::string(ssh_get_error(session_)) : std::string("no session");
}

SshErrorKind SshSession::last_error_kind() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_kind_;
}

std::optional<std::string> SshSession::host_key_fingerprint() {
  std::lock_guard<std::mutex> lock(mu_);
  return fingerprint_;
}

std::optional<std::string> SshSession::accepted_new_fingerprint() {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_new_;
}

Status SshSession::Connect() {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  return ConnectLocked();
}

void SshSession::Disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  DisconnectLocked();
}

bool SshSession::connected() {
  std::lock_guard<std::mutex> lock(mu_);
  return AliveLocked();
}

bool SshSession::AliveLocked() {
  if (session_ == nullptr || ssh_is_connected(session_) == 0) return false;
  return (ssh_get_status(session_) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0;
}

void SshSession::AccountWireLocked() {
  if (session_ == nullptr) return;
  const socket_t fd = ssh_get_fd(session_);
  uint64_t out = 0, in = 0;
  if (fd == SSH_INVALID_SOCKET || !internal::TcpBytes(fd, &out, &in)) return;
  if (out > wire_out_seen_) Note(internal::Stat::kWireOut, static_cast<int64_t>(out - wire_out_seen_));
  if (in > wire_in_seen_) Note(internal::Stat::kWireIn, static_cast<int64_t>(in - wire_in_seen_));
  wire_out_seen_ = out;
  wire_in_seen_ = in;
}

void SshSession::DisconnectLocked() {
  AccountWireLocked();  // the socket goes away: count what it moved
  wire_out_seen_ = 0;
  wire_in_seen_ = 0;
  if (sftp_ != nullptr) {
    internal::FreeSftp(sftp_);
    sftp_ = nullptr;
  }
  shell_ = nullptr;  // ssh_free below frees the channel with the session
  shell_pid_ = 0;
  sftp_refused_ = false;  // asked again on the next connection
  if (session_ != nullptr) {
    if (ssh_is_connected(session_) != 0) ssh_disconnect(session_);
    ssh_free(session_);
    session_ = nullptr;
  }
}

Status SshSession::ConnectLocked() {
  if (session_ != nullptr && AliveLocked()) {
    // Process pending input without blocking so a connection the server has
    // already dropped is noticed here, before any new operation starts.
    internal::SessionPump(session_).Pump(std::chrono::milliseconds(0));
  }
  if (AliveLocked()) return Status::Ok();
  DisconnectLocked();  // drop a dead session (and its sftp) before reconnecting
  if (target_.host.empty() || target_.user.empty()) {
    return Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument,
                "ssh target needs a host and a user");
  }
  if (target_.known_hosts_file.empty()) {
    return Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument,
                fmt::format("ssh target {} has no known_hosts file; host keys must be verified",
                            target_.Endpoint()));
  }
  session_ = ssh_new();
  if (session_ == nullptr) return Status::Internal("ssh_new failed");
  int port = target_.port;
  long timeout_s = static_cast<long>(target_.connect_timeout.count());
  bool process_config = false;
  int nodelay = 1;
  ssh_options_set(session_, SSH_OPTIONS_PROCESS_CONFIG, &process_config);
  ssh_options_set(session_, SSH_OPTIONS_HOST, target_.host.c_str());
  ssh_options_set(session_, SSH_OPTIONS_PORT, &port);
  ssh_options_set(session_, SSH_OPTIONS_USER, target_.user.c_str());
  ssh_options_set(session_, SSH_OPTIONS_KNOWNHOSTS, target_.known_hosts_file.c_str());
  ssh_options_set(session_, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null");
  ssh_options_set(session_, SSH_OPTIONS_TIMEOUT, &timeout_s);
  ssh_options_set(session_, SSH_OPTIONS_NODELAY, &nodelay);

  if (ssh_connect(session_) != SSH_OK) {
    std::string err = LibError();
    DisconnectLocked();
    return Fail(SshErrorKind::kUnreachable, Code::kUnavailable,
                fmt::format("cannot reach {}: {}", target_.Endpoint(), err));
  }
  handshakes_.fetch_add(1);
  Note(internal::Stat::kHandshakes);
  Note(internal::Stat::kRoundTrips, kConnectRoundTrips);
  Status s = VerifyHostKeyLocked();
  if (s.ok()) s = AuthenticateLocked();
  if (!s.ok()) {
    DisconnectLocked();
    return s;
  }
  spdlog::debug("ssh: connected to {} (host key {})", target_.Endpoint(),
                fingerprint_.value_or("?"));
  return Status::Ok();
}

Status SshSession::VerifyHostKeyLocked() {
  const std::string hp = fmt::format("{}:{}", target_.host, target_.port);
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session_, &key) != SSH_OK) {
    return Fail(SshErrorKind::kUnreachable, Code::kUnavailable,
                fmt::format("{} sent no host key: {}", hp, LibError()));
  }
  unsigned char* hash = nullptr;
  size_t hlen = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) == 0) {
    char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen);
    if (fp != nullptr) {
      fingerprint_ = fp;
      ssh_string_free_char(fp);
    }
    ssh_clean_pubkey_hash(&hash);
  }
  ssh_key_free(key);
  const std::string fp = fingerprint_.value_or("?");
  const std::string& kh = target_.known_hosts_file;

  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return Status::Ok();
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      spdlog::error("ssh: HOST KEY MISMATCH for {} (presented {})", hp, fp);
      return Fail(SshErrorKind::kHostKeyMismatch, Code::kPermissionDenied,
                  fmt::format("HOST KEY MISMATCH for {}: the server presented {} which does not "
                              "match the key recorded in {}. Nothing was executed. If the "
                              "machine was reinstalled, remove the old entry (ssh-keygen -R "
                              "'[{}]:{}' -f {}) and add it again",
                              hp, fp, kh, target_.host, target_.port, kh));
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (target_.host_key_policy == HostKeyPolicy::kAcceptNew) {
        if (ssh_session_update_known_hosts(session_) != SSH_OK) {
          return Fail(SshErrorKind::kHostKeyUnknown, Code::kPermissionDenied,
                      fmt::format("host key for {} is new but could not be added to {}: {}", hp,
                                  kh, LibError()));
        }
        accepted_new_ = fp;
        spdlog::warn("ssh: accepted new host key {} for {} into {}", fp, hp, kh);
        return Status::Ok();
      }
      return Fail(SshErrorKind::kHostKeyUnknown, Code::kPermissionDenied,
                  fmt::format("host key for {} is not in {} (server presented {}); add it or add "
                              "the machine with --accept-new-host-key",
                              hp, kh, fp));
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return Fail(SshErrorKind::kHostKeyUnknown, Code::kPermissionDenied,
                  fmt::format("cannot check host key for {} against {}: {}", hp, kh, LibError()));
  }
}

Status SshSession::AuthenticateLocked() {
  const std::string& id = target_.identity_file;
  struct stat st {};
  if (id.empty() || ::stat(id.c_str(), &st) != 0) {
    return Fail(SshErrorKind::kAuthFailed, Code::kPermissionDenied,
                fmt::format("identity file '{}' for {} does not exist", id, target_.Endpoint()));
  }
  ssh_key key = nullptr;
  if (ssh_pki_import_privkey_file(id.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
    return Fail(SshErrorKind::kAuthFailed, Code::kPermissionDenied,
                fmt::format("cannot load identity file '{}' (unreadable, not a private key, or "
                            "passphrase-protected, which is not supported)",
                            id));
  }
  int rc = ssh_userauth_publickey(session_, nullptr, key);
  ssh_key_free(key);
  Note(internal::Stat::kRoundTrips, kAuthRoundTrips);
  if (rc != SSH_AUTH_SUCCESS) {
    return Fail(SshErrorKind::kAuthFailed, Code::kPermissionDenied,
                fmt::format("public key '{}' was rejected by {}; check that its .pub is in the "
                            "user's authorized_keys ({})",
                            id, target_.Endpoint(), LibError()));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Exec

Result<ssh_channel_struct*> SshSession::OpenExecChannelLocked(const std::string& command) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    Status s = ConnectLocked();
    if (!s.ok()) return s;
    ssh_channel ch = ssh_channel_new(session_);
    if (ch != nullptr && ssh_channel_open_session(ch) == SSH_OK &&
        ssh_channel_request_exec(ch, command.c_str()) == SSH_OK) {
      Note(internal::Stat::kRoundTrips, 2);  // the open's confirmation, the exec request's reply
      return ch;
    }
    std::string err = LibError();
    if (ch != nullptr) {
      ssh_channel_close(ch);
      ssh_channel_free(ch);
    }
    if (AliveLocked()) {
      return Fail(SshErrorKind::kChannelFailed, Code::kUnavailable,
                  fmt::format("cannot start a command on {}: {}", target_.Endpoint(), err));
    }
    // The connection was dead before the command could start: reconnect once.
    spdlog::info("ssh: connection to {} lost ({}); reconnecting", target_.Endpoint(), err);
    DisconnectLocked();
  }
  return Fail(SshErrorKind::kConnectionLost, Code::kUnavailable,
              fmt::format("connection to {} dropped twice while starting a command",
                          target_.Endpoint()));
}

Result<ExecResult> SshSession::Exec(const std::string& command,
                                    std::chrono::milliseconds timeout,
                                    std::string_view stdin_data, size_t output_cap) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  Result<ExecResult> r = ExecLocked(command, timeout, stdin_data, output_cap);
  if (r.ok()) r->timeout = timeout;
  return r;
}

Result<ExecResult> SshSession::ExecInCommandShell(const std::string& command, std::chrono::milliseconds timeout,
                                                  size_t output_cap) {
  std::lock_guard<std::mutex> lock(mu_);
  OpScope op(this);
  if (command.find('\0') != std::string::npos)
    return Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument,
                "command contains a NUL byte; build it with BuildCommand from clean argv");
  std::optional<Result<ExecResult>> r;
  if (target_.command_shell && !shell_unsupported_) r = ExecInShellLocked(command, timeout, output_cap);
  if (!r) return Status::Precondition(fmt::format("no command shell on {}", target_.Endpoint()));
  if (r->ok()) (*r)->timeout = timeout;
  return std::move(*r);
}

Result<ExecResult> SshSession::ExecLocked(const std::string& command,
                                          std::chrono::milliseconds timeout,
                                          std::string_view stdin_data, size_t output_cap) {
  if (command.find('\0') != std::string::npos) {
    return Fail(SshErrorKind::kInvalidInput, Code::kInvalidArgument,
                "command contains a NUL byte; build it with BuildCommand from clean argv");
  }
  if (stdin_data.empty() && target_.command_shell && !shell_unsupported_) {
    if (auto r = ExecInShellLocked(command, timeout, output_cap)) return std::move(*r);
  }
  return ExecOnChannelLocked(command, timeout, stdin_data, output_cap);
}

Result<ExecResult> SshSession::ExecOnChannelLocked(const std::string& command,
                                                   std::chrono::milliseconds timeout,
                                                   std::string_view stdin_data,
                                                   size_t output_cap) {
  const auto start = internal::Clock::now();
  const auto deadline = start + timeout;
  auto opened = OpenExecChannelLocked(command);
  if (!opened.ok()) return opened.status();
  ssh_channel ch = opened.value();
  commands_.fetch_add(1);
  Note(internal::Stat::kCommands);
  Note(internal::Stat::kExecChannels);
  // With stdin data the command's answer waits for the data, sent once the
  // exec request was answered: one more round trip. Without, its output
  // follows the exec request's reply unasked.
  if (!stdin_data.empty()) Note(internal::Stat::kRoundTrips);
  internal::ChannelGuard guard(ch);

  ExecResult out;
  OutputCap out_cap(output_cap), err_cap(output_cap);
  // CommandLostLocked frees the session's channels too: Release() first.
  auto lost = [&](const std::string& what) {
    guard.Release(/*close=*/false);
    return CommandLostLocked(what);
  };

  if (!stdin_data.empty()) {
    const size_t sent = internal::WriteAll(ch, stdin_data);
    Note(internal::Stat::kPayloadOut, static_cast<int64_t>(sent));
    // Short: the remote closed its stdin early (not an error), or the connection died.
    if (sent < stdin_data.size() && !AliveLocked()) return lost("while sending stdin");
  }
  ssh_channel_send_eof(ch);

  char buf[32768];
  bool eof = false;
  while (true) {
    bool got = false;
    for (int is_stderr = 0; is_stderr < 2; ++is_stderr) {
      int n = ssh_channel_read_nonblocking(ch, buf, sizeof(buf), is_stderr);
      if (n > 0) {
        std::string& acc = is_stderr ? out.stderr_data : out.stdout_data;
        acc.append(buf, static_cast<size_t>(n));
        (is_stderr ? err_cap : out_cap).Trim(acc);
        Note(internal::Stat::kPayloadIn, n);
        got = true;
      } else if (n == SSH_ERROR && !eof) {
        if (!AliveLocked()) return lost("mid-command");
        eof = true;  // channel error on a live session: treat as end of output
      }
    }
    if (!AliveLocked()) {
      if (eof) break;  // all output and EOF arrived; only the close was lost
      return lost("mid-command");
    }
    // A remote CLOSE without EOF also ends the output.
    if (!eof && (ssh_channel_is_eof(ch) != 0 || ssh_channel_is_closed(ch) != 0)) eof = true;
    if (eof && ssh_channel_is_closed(ch) != 0) break;
    auto now = internal::Clock::now();
    if (now >= deadline) {
      out.timed_out = true;
      ssh_channel_request_send_signal(ch, "TERM");
      break;
    }
    if (!got) internal::SessionPump(session_).Pump(deadline - now);
  }
  if (!out.timed_out) out.exit_status = ssh_channel_get_exit_status(ch);
  out.stdout_omitted = out_cap.Finish(out.stdout_data);
  out.stderr_omitted = err_cap.Finish(out.stderr_data);
  out.duration = std::chrono::duration_cast<std::chrono::milliseconds>(
      internal::Clock::now() - start);
  if (out.timed_out) last_kind_ = SshErrorKind::kTimeout;
  return out;
}

}  // namespace npuprof::ssh
