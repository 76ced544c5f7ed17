// Process-wide and per-task counters of the SSH layer, for measurement
// (docs/PERFORMANCE.md, "Per-run overhead" and "Far targets"). Counting is a
// few relaxed atomic adds per event; nothing here changes behaviour.
//
// Round trips (`round_trips`): the request/answer exchanges with the target
// a call waited for, i.e. what a far link multiplies by its RTT. The rule:
//   * a handshake: kConnectRoundTrips (version exchange, key exchange, new
//     keys; the TCP connect before them costs one more on a real link and
//     is not counted) and kAuthRoundTrips (service request, public key
//     accepted);
//   * a command on the command shell: 1 (the frame out, its end markers back);
//   * a command on its own channel (no command shell, the command shell's
//     own start, a clock exchange): 2 (open, exec request); the output and
//     exit status follow the exec's reply unasked (what the remote command
//     takes is its own time, not a round trip); with stdin data 1 more (the
//     data goes once the exec was answered); a clock exchange 1 per sample;
//   * an HTTP request over a direct-tcpip channel: 2 (open, request/response);
//     1 on a channel kept from the answer before it (keep-alive);
//   * the SFTP subsystem's start: kSftpStartRoundTrips (open, subsystem,
//     version) once per connection;
//   * SFTP: stat 1; read 2 (open, close) + 1 per read request (the last
//     one answers end of file); write: create 1 + 1 per write request +
//     close, chmod, rename (1 each); list SftpListRoundTrips(names);
//   * a file operation over the command channel (no SFTP): its commands.
// Exchanges that overlap (HttpMany's parallel requests, a task's helper
// threads) each count, so the figure is an upper bound of the round trips
// waited for one after another. A channel that could not be opened (or a
// handshake that failed) is not counted; an SFTP request that failed is. A
// command's own run time is no round trip; busy_us (time inside SshSession
// calls) holds both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace npuprof::ssh {

struct SshStats {
  int64_t handshakes = 0;        // successful TCP connect + key exchange (ssh_connect)
  int64_t commands = 0;          // remote commands started (Exec calls that got going)
  int64_t exec_channels = 0;     // commands that had a channel of their own (stdin data, no command shell)
  int64_t shell_channels = 0;    // command shells started (command_shell_protocol.h)
  int64_t forward_channels = 0;  // direct-tcpip channels opened (each for one HTTP request or several kept alive)
  int64_t sftp_sessions = 0;     // SFTP subsystems opened (one per connection)
  int64_t sftp_ops = 0;          // ReadFile / ListDir / Stat / WriteFile calls
  int64_t payload_out = 0;       // bytes sent as payload: stdin, SFTP writes, HTTP requests
  int64_t payload_in = 0;        // bytes received as payload: stdout+stderr, SFTP reads, HTTP responses
  int64_t wire_out = 0;          // TCP bytes sent on SSH connections (acked; incl. kex, framing)
  int64_t wire_in = 0;           // TCP bytes received on SSH connections
  int64_t round_trips = 0;       // exchanges with the target waited for (the rule above)
  int64_t busy_us = 0;           // time spent inside SshSession calls (after taking the session lock)

  SshStats operator-(const SshStats& o) const;
  SshStats& operator+=(const SshStats& o);
};

// The round trips of the rule above that are not 1.
inline constexpr int64_t kConnectRoundTrips = 3;
inline constexpr int64_t kAuthRoundTrips = 2;
inline constexpr int64_t kSftpStartRoundTrips = 3;
// An SFTP directory listing of `names` names ("." and ".." included):
// opendir, one READDIR per 100 names (OpenSSH's sftp-server sends at most
// 100 per answer), the READDIR answered end of list, closedir.
inline constexpr int64_t SftpListRoundTrips(int64_t names) { return 1 + (names + 99) / 100 + 1 + 1; }

// Totals of every SshSession of this process.
SshStats ProcessSshStats();

namespace internal {
struct StatsSink;
}

// Attribution to one task: while a scope is alive on a thread, the SSH work
// of that thread is added to it, and so is the work of every SshSession
// created on that thread while the scope is alive, whichever thread then uses
// it (a handler may drive its own session from a helper thread). Work of a
// thread without a scope on a session created elsewhere goes to the scope of
// the session's creator, or, while the session is lent to one caller alone
// (SshPool::Acquire), to the scope of that caller (a handler that runs an
// HTTP wave on a helper thread over a lent session). Scopes nest (the inner
// one counts; the outer one is restored at its end).
class SshStatsScope {
 public:
  SshStatsScope();
  ~SshStatsScope();
  SshStatsScope(const SshStatsScope&) = delete;
  SshStatsScope& operator=(const SshStatsScope&) = delete;
  SshStats totals() const;

 private:
  std::shared_ptr<internal::StatsSink> sink_;
  std::shared_ptr<internal::StatsSink> prev_;
};

// "handshakes=1 exec=3 exec_channels=0 shells=1 fwd=0 sftp_sessions=1 sftp_ops=5 payload_out=.. payload_in=.. wire_out=.. wire_in=.. round_trips=.. ssh_ms=.."
std::string FormatSshStats(const SshStats& s);

}  // namespace npuprof::ssh
