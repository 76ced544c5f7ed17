// Process-wide and per-task counters of the SSH layer, for measurement
// (docs/PERFORMANCE.md, "Per-run overhead"). Counting is a few relaxed atomic
// adds per event; nothing here changes behaviour.
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
  int64_t forward_channels = 0;  // direct-tcpip channels opened = HTTP requests sent
  int64_t sftp_sessions = 0;     // SFTP subsystems opened (one per connection)
  int64_t sftp_ops = 0;          // ReadFile / ListDir / Stat / WriteFile calls
  int64_t payload_out = 0;       // bytes sent as payload: stdin, SFTP writes, HTTP requests
  int64_t payload_in = 0;        // bytes received as payload: stdout+stderr, SFTP reads, HTTP responses
  int64_t wire_out = 0;          // TCP bytes sent on SSH connections (acked; incl. kex, framing)
  int64_t wire_in = 0;           // TCP bytes received on SSH connections
  int64_t busy_us = 0;           // time spent inside SshSession calls (after taking the session lock)

  SshStats operator-(const SshStats& o) const;
  SshStats& operator+=(const SshStats& o);
};

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
// the session's creator. Scopes nest (the inner one counts; the outer one
// is restored at its end).
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

// "handshakes=1 exec=3 exec_channels=0 shells=1 fwd=0 sftp_sessions=1 sftp_ops=5 payload_out=.. payload_in=.. wire_out=.. wire_in=.. ssh_ms=.."
std::string FormatSshStats(const SshStats& s);

}  // namespace npuprof::ssh
