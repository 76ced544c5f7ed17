// SshSession: one libssh session per target, connected lazily, reused for every
// command (channels), file access (one SFTP subsystem, or the command channel
// when the target's sshd refuses SFTP: file_over_exec_protocol.h) and HTTP
// (direct-tcpip channels). Thread-safe: every public method takes the session
// mutex, so one libssh session is never used from two threads at once.
//
// Failures carry an error kind (see SshErrorKind) both in last_error_kind()
// and as the prefix "<kind>: " of the Status message (ErrorKindOf parses it).
// IsPermanent says which kinds no retry can fix.
//
// Bytes from the target are bytes: command output, file contents and names
// are returned exactly as sent (never assumed UTF-8), within the caps below.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/ssh/clock_exchange_protocol.h"
#include "workers/ssh/http_over_ssh.h"

// Opaque libssh handles (avoid including libssh in every user of this header).
struct ssh_session_struct;
struct ssh_channel_struct;
struct sftp_session_struct;

namespace npuprof::ssh {

namespace internal {
struct StatsSink;
enum class Stat;
}  // namespace internal

enum class HostKeyPolicy { kStrict, kAcceptNew };

struct SshTarget {
  std::string host;
  int port = 22;
  std::string user;
  std::string identity_file;     // private key path (public-key auth only)
  std::string known_hosts_file;  // host keys are verified against this file only
  HostKeyPolicy host_key_policy = HostKeyPolicy::kStrict;
  std::string env_script;        // sourced once by the command shell, and by BuildRemoteScript's prefix
  std::chrono::seconds connect_timeout{10};
  // Run commands through one long-lived command shell per connection
  // (command_shell_protocol.h) instead of a new channel + login shell each.
  // Commands with stdin data always get their own channel.
  bool command_shell = true;

  std::string Endpoint() const;  // "user@host:port"
};

enum class SshErrorKind {
  kNone,
  kUnreachable,       // connect refused / timeout / kex failed   -> kUnavailable
  kAuthFailed,        // key rejected or unreadable               -> kPermissionDenied
  kHostKeyUnknown,    // not in known_hosts (strict)              -> kPermissionDenied
  kHostKeyMismatch,   // changed/other key type                   -> kPermissionDenied
  kTimeout,           // operation deadline                       -> kTimeout
  kChannelFailed,     // channel/exec/forward/sftp open refused   -> kUnavailable/kIoError
  kConnectionLost,    // died mid-command; caller decides retry   -> kUnavailable
  kRemoteError,       // the file operation failed on the target (no such file, ...)
  kInvalidInput,      // rejected before anything was sent
  kSubsystemRefused,  // sshd refused the sftp subsystem                -> kUnavailable
  kToolMissing,       // a tool a file operation needs is not on PATH  -> kFailedPrecondition
  kEnvScriptFailed,   // the machine's env script exited or returned non-zero (env_script_protocol.h)
                      //                                              -> kFailedPrecondition
  kRemoteDiskFull,    // a file could not be written: the target's file system is full -> kNoSpace
  kLast = kRemoteDiskFull,
};
const char* SshErrorKindName(SshErrorKind k);
// Parses the "<kind>: " prefix of a Status produced by this library.
SshErrorKind ErrorKindOf(const Status& s);
// Kinds that the same call will meet again however often it is retried:
// auth refused, host key unknown or changed, subsystem refused, a missing
// tool, invalid input, a failing env script, a full remote disk. (kRemoteError is the caller's call: a missing file
// may appear later.)
bool IsPermanent(SshErrorKind k);

// Caps on remote data (docs/RELIABILITY.md, "Caps").
// Exec keeps at most this many bytes of each of stdout and stderr: beyond it,
// the first and the last half with a marker between (OmittedMarker).
inline constexpr size_t kExecOutputCap = size_t{64} << 20;
// ReadFile returns at most this many bytes unless the caller asks for more.
inline constexpr uint64_t kReadFileDefaultMax = uint64_t{64} << 20;

struct ExecResult {
  int exit_status = -1;  // -1 if killed by a signal, timed out or unknown
  std::string stdout_data;  // exact bytes, or head + marker + tail past the cap
  std::string stderr_data;
  uint64_t stdout_omitted = 0;  // bytes left out of stdout_data by the cap (0: exact)
  uint64_t stderr_omitted = 0;
  bool timed_out = false;
  std::chrono::milliseconds timeout{0};  // what the caller gave (to say "timed out after N s")
  std::chrono::milliseconds duration{0};
};

struct DirEntry {
  std::string name;    // any bytes but NUL and '/'
  uint64_t size = 0;   // of the entry itself (a symlink's own size)
  bool is_dir = false; // a directory, not a symlink to one
};

struct FileStat {
  uint64_t size = 0;
  bool is_dir = false;
  uint32_t mode = 0;   // permission bits incl. type bits (st_mode)
  int64_t mtime = 0;   // seconds since epoch
};

class SshSession {
 public:
  explicit SshSession(SshTarget target);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  const SshTarget& target() const { return target_; }

  // Connects (if not yet connected): TCP, key exchange, host key check, auth.
  Status Connect();
  void Disconnect();
  bool connected();

  // Runs `command` (a shell string; build it with BuildCommand /
  // BuildRemoteScript) in the user's login shell on the target: in the
  // session's command shell (target.command_shell; the shell is started on
  // first use and again after it ended), or else on a new exec channel.
  // Non-zero exit is a successful Result.
  // Timeout: TERM to the command (and, in the command shell, every process
  // below it), timed_out=true; the command shell is then replaced.
  // A dead connection is re-established once, transparently, only if the
  // command cannot have started (channel open / exec request / frame write
  // failed). If the connection or the command shell dies mid-command:
  // kUnavailable, kind connection_lost.
  // stdin_data (a new channel always): written then EOF is sent (meant for
  // small payloads: it is written before the deadline applies). Output is
  // buffered in memory up to output_cap bytes per stream (min 4096): past
  // it, the first and last halves with a marker between, and
  // stdout_omitted / stderr_omitted say how much was left out.
  Result<ExecResult> Exec(const std::string& command, std::chrono::milliseconds timeout,
                          std::string_view stdin_data = {}, size_t output_cap = kExecOutputCap);

  // Runs `command` in the connection's command shell only, never on a
  // channel of its own: the command's text travels in the shell's stdin and
  // is never any process's argument (what `export K='v'` puts in a command
  // built by BuildRemoteScript stays in the environment, which only the user
  // can read). Status::Precondition, with nothing run, where the command
  // shell is off or the login shell cannot run it. Otherwise as Exec.
  Result<ExecResult> ExecInCommandShell(const std::string& command, std::chrono::milliseconds timeout,
                                        size_t output_cap = kExecOutputCap);

  // Files. One SFTP subsystem per connection (reopened after reconnect). A
  // connection whose sshd refuses the subsystem is noticed on its first file
  // operation, and every file operation on it then runs over the command
  // channel instead (file_over_exec_protocol.h: same results, same errors, a few
  // coreutils on the target). All are idempotent and retried once on a
  // dropped connection. Missing paths are kRemoteError + kNotFound.
  // At most max_bytes from offset (fewer at end of file).
  Result<std::string> ReadFile(const std::string& path, uint64_t offset = 0,
                               uint64_t max_bytes = kReadFileDefaultMax);
  Result<std::vector<DirEntry>> ListDir(const std::string& path);  // no "." / "..", by name
  Result<FileStat> Stat(const std::string& path);                  // follows symlinks
  // Atomic: data goes to a new temp file in the same directory (created
  // exclusively, never through a symlink, private until complete), which
  // gets `mode` and is then renamed over `path`. A symlink at `path` is
  // replaced, never followed; a directory at `path` is an error. A dropped
  // connection may leave a temp file `.<name>.npuprof-<random>.tmp` behind.
  Status WriteFile(const std::string& path, std::string_view data, uint32_t mode = 0644);
  // True once this connection's sshd refused SFTP (file operations use the
  // command channel until the next connection).
  bool files_over_exec();

  // HTTP to a service port on the target through a direct-tcpip channel.
  Result<HttpResponse> Http(const HttpRequest& req);
  // Up to `concurrency` requests at once as separate channels on this session,
  // driven from the calling thread; each has its own timeout; results are in
  // input order.
  std::vector<Result<HttpResponse>> HttpMany(const std::vector<HttpRequest>& reqs,
                                             int concurrency);

  // The target's clock read `samples` times on ONE exec channel running a
  // small loop (clock_exchange_protocol.h): per sample one line written, one
  // read back, each sample {t0_us, remote_ns, t1_us} on this host's wall
  // clock and the method that answered (python, bash or date). Exec only:
  // works where SFTP is refused. Every read is bounded by `timeout` (the
  // start-up by timeout + the connect timeout); a reply that is not a clock
  // or longer than kClockReplyMaxBytes is a remote_error showing what came
  // back; the channel is closed on every path. prefer: see
  // ClockExchangeScript (tests force one method).
  Result<std::vector<ClockSample>> ClockExchange(int samples, std::chrono::milliseconds timeout,
                                                 ClockMethod prefer = ClockMethod::kAuto);

  // Counters (lock-free reads). Process- and thread-wide totals over all
  // sessions: ssh_stats.h.
  int64_t handshakes() const { return handshakes_.load(); }  // successful key exchanges
  int64_t commands() const { return commands_.load(); }      // Exec calls that started
  SshErrorKind last_error_kind();

  // "SHA256:..." of the server host key seen on the last connect.
  std::optional<std::string> host_key_fingerprint();
  // Set when accept_new added an unknown host key to known_hosts.
  std::optional<std::string> accepted_new_fingerprint();

 private:
  Status ConnectLocked();
  void DisconnectLocked();
  Status VerifyHostKeyLocked();
  Status AuthenticateLocked();
  bool AliveLocked();
  Status Fail(SshErrorKind kind, Code code, const std::string& msg);
  // The connection died while a command was on it (what: "mid-command", ...):
  // disconnects and says the command may or may not have run.
  Status CommandLostLocked(const std::string& what);
  std::string LibError();
  // Opens a session channel and requests exec; reconnects once if the
  // connection was found dead.
  Result<ssh_channel_struct*> OpenExecChannelLocked(const std::string& command);
  Result<ExecResult> ExecLocked(const std::string& command, std::chrono::milliseconds timeout,
                                std::string_view stdin_data, size_t output_cap);
  Result<ExecResult> ExecOnChannelLocked(const std::string& command,
                                         std::chrono::milliseconds timeout,
                                         std::string_view stdin_data, size_t output_cap);
  // Command shell (command_shell.cc). ExecInShellLocked returns nullopt when
  // the command shell cannot be used (the caller then opens a channel).
  std::optional<Result<ExecResult>> ExecInShellLocked(const std::string& command,
                                                      std::chrono::milliseconds timeout,
                                                      size_t output_cap);
  Status EnsureShellLocked(std::chrono::steady_clock::time_point deadline);
  void CloseShellLocked();
  void KillShellCommandLocked();
  std::string NewNonce();
  // The connection's SFTP session; kSubsystemRefused (and sftp_refused_ set)
  // when sshd refuses it.
  Result<sftp_session_struct*> SftpLocked();
  // After sftp_new failed on a live connection: true when sshd refuses the
  // subsystem itself (asked on a channel of its own).
  bool SubsystemRefusedLocked();
  Status SftpError(const std::string& op, const std::string& path);
  // After a write of `bytes` to `path` failed with `failure`: a
  // remote_disk_full error naming the file system, its free space and the
  // write when that is why, else nullopt.
  std::optional<Status> FullDiskLocked(const std::string& path, uint64_t bytes, const Status& failure);
  template <typename SftpFn, typename ExecFn>
  auto FileOpLocked(SftpFn via_sftp, ExecFn via_exec) -> decltype(via_exec());
  // SFTP and command-channel halves of the file operations (sftp_ops.cc,
  // file_over_exec.cc). The *OverExec ones run a script from
  // file_over_exec_protocol.h on the command channel.
  Result<std::string> SftpReadLocked(sftp_session_struct* sftp, const std::string& path,
                                     uint64_t offset, uint64_t max_bytes);
  Result<std::vector<DirEntry>> SftpListLocked(sftp_session_struct* sftp, const std::string& path);
  Result<FileStat> SftpStatLocked(sftp_session_struct* sftp, const std::string& path);
  Status SftpWriteLocked(sftp_session_struct* sftp, const std::string& path, std::string_view data,
                         uint32_t mode);
  Result<std::string> ReadOverExecLocked(const std::string& path, uint64_t offset, uint64_t max_bytes);
  Result<std::vector<DirEntry>> ListOverExecLocked(const std::string& path);
  Result<FileStat> StatOverExecLocked(const std::string& path);
  Status WriteOverExecLocked(const std::string& path, std::string_view data, uint32_t mode);
  // Renames `tmp` over `path` with `mv -f -T` on the command channel (SFTP v3
  // cannot rename over an existing file).
  Status RenameOverExecLocked(const std::string& tmp, const std::string& path);
  // Runs a file-operation script (argv from file_over_exec_protocol.h); a
  // script that exits non-zero or times out is an error naming `op` and
  // `path` with the kind the SFTP path would report.
  Result<ExecResult> RunFileScriptLocked(const char* op, const std::string& path,
                                         const std::vector<std::string>& argv,
                                         std::string_view stdin_data, size_t output_cap);
  Result<ssh_channel_struct*> OpenForwardLocked(const HttpRequest& req);
  // Measurement (ssh_stats.h): adds the TCP bytes of the connection since the
  // last look to the counters.
  class OpScope;
  void AccountWireLocked();
  void Note(internal::Stat what, int64_t n = 1);

  SshTarget target_;
  std::mutex mu_;
  ssh_session_struct* session_ = nullptr;
  sftp_session_struct* sftp_ = nullptr;
  ssh_channel_struct* shell_ = nullptr;  // the command shell's channel (freed with the session)
  int64_t shell_pid_ = 0;                // its driver's pid on the target
  bool shell_unsupported_ = false;       // the login shell could not run the driver: use channels
  bool sftp_refused_ = false;            // this connection's sshd refused SFTP: files over exec
  uint64_t nonce_state_[2] = {0, 0};
  SshErrorKind last_kind_ = SshErrorKind::kNone;
  std::optional<std::string> fingerprint_;
  std::optional<std::string> accepted_new_;
  std::atomic<int64_t> handshakes_{0};
  std::atomic<int64_t> commands_{0};
  uint64_t wire_out_seen_ = 0;  // TCP byte counts of the current connection already counted
  uint64_t wire_in_seen_ = 0;
  // SshStatsScope of the thread that created this session (may be null).
  std::shared_ptr<internal::StatsSink> creator_sink_;
};

}  // namespace npuprof::ssh
