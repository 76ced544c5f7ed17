// Internal helpers shared by the SshSession implementation files. Not part of
// the public API of npuprof_ssh.
#pragma once

#include <libssh/libssh.h>
#include <libssh/sftp.h>

#include <chrono>

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

}  // namespace npuprof::ssh::internal
