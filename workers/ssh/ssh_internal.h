// Internal helpers shared by the SshSession implementation files. Not part of
// the public API of npuprof_ssh.
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "workers/ssh/ssh_session.h"
#include "workers/ssh/ssh_stats.h"

namespace npuprof::ssh::internal {

using Clock = std::chrono::steady_clock;

// Frees a channel (close + free) on scope exit unless released.
class ChannelGuard {
 public:
  explicit ChannelGuard(ssh_channel ch) : ch_(ch) {}
  ~ChannelGuard() { Release(true); }
  ChannelGuard(const ChannelGuard&) = delete;
  ChannelGuard& operator=(const ChannelGuard&) = delete;
  // close=false: forget the channel (the session is about to be freed).
  void Release(bool close);

 private:
  ssh_channel ch_;
};

// Drives a session's packet processing while its channels are read with
// ssh_channel_read_nonblocking. Needed because libssh stops processing packets
// in read/poll calls once a channel has seen EOF, so the CLOSE (and
// exit-status) of that channel would never be handled. Detach() before the
// session is freed.
class SessionPump {
 public:
  explicit SessionPump(ssh_session session);
  ~SessionPump() { Detach(); }
  SessionPump(const SessionPump&) = delete;
  SessionPump& operator=(const SessionPump&) = delete;
  // Waits up to min(max_wait, 20ms) for data and processes incoming packets.
  void Pump(Clock::duration max_wait);
  void Detach();

 private:
  ssh_session session_;
  ssh_event event_;
};

void FreeSftp(sftp_session sftp);

// Writes data to ch in chunks the channel window takes; returns how many
// bytes went out (fewer than data.size() when a write failed).
size_t WriteAll(ssh_channel ch, std::string_view data);
// Reads and drops what is buffered on one stream of ch (0 stdout, 1 stderr).
void DrainStream(ssh_channel ch, int is_stderr);

// Measurement counters (ssh_stats.h): adds n to the process and thread totals.
// Keep in the order of kFields in ssh_stats.cc.
enum class Stat {
  kHandshakes,
  kCommands,
  kExecChannels,
  kShellChannels,
  kForwardChannels,
  kSftpSessions,
  kSftpOps,
  kPayloadOut,
  kPayloadIn,
  kWireOut,
  kWireIn,
  kRoundTrips,
  kBusyUs,
  kCount
};
// Adds n to the process totals and to the calling thread's SshStatsScope, or,
// when the thread has none, to `fallback` (the scope the session was created in).
void Count(Stat what, int64_t n, StatsSink* fallback);
// The calling thread's SshStatsScope sink (null when none).
std::shared_ptr<StatsSink> CurrentSink();
// A session lent to one caller alone (SshPool::Acquire): the work of a
// thread without a scope on it goes to `sink` (the borrower's scope) until
// Unlent, instead of to its creator's. Count's `fallback` for such work:
// SessionSink(session, the creator's sink).
void LentTo(const void* session, std::shared_ptr<StatsSink> sink);
void Unlent(const void* session);
StatsSink* SessionSink(const void* session, StatsSink* creator);
// TCP bytes sent (acked) and received on socket fd so far (TCP_INFO).
bool TcpBytes(int fd, uint64_t* sent, uint64_t* received);

}  // namespace npuprof::ssh::internal

namespace npuprof::ssh {

// One public SshSession call, for the counters: on scope exit adds the time
// spent and the TCP bytes moved since the last look. Construct it after the
// session lock is taken (it is destroyed before the lock is released).
class SshSession::OpScope {
 public:
  explicit OpScope(SshSession* s) : s_(s), start_(internal::Clock::now()) {}
  ~OpScope() {
    s_->AccountWireLocked();
    s_->Note(internal::Stat::kBusyUs,
             std::chrono::duration_cast<std::chrono::microseconds>(internal::Clock::now() - start_).count());
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  SshSession* s_;
  internal::Clock::time_point start_;
};

}  // namespace npuprof::ssh
