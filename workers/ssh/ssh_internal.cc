#include "workers/ssh/ssh_internal.h"

#include <poll.h>

#include <algorithm>

namespace npuprof::ssh::internal {

void ChannelGuard::Release(bool close) {
  if (ch_ == nullptr) return;
  if (close) {
    if (ssh_channel_is_closed(ch_) == 0) ssh_channel_close(ch_);
    ssh_channel_free(ch_);
  }
  ch_ = nullptr;
}

SessionPump::SessionPump(ssh_session session) : session_(session), event_(ssh_event_new()) {
  if (event_ != nullptr && ssh_event_add_session(event_, session_) != SSH_OK) {
    ssh_event_free(event_);
    event_ = nullptr;
  }
}

void SessionPump::Pump(Clock::duration max_wait) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(max_wait).count();
  int wait_ms = static_cast<int>(std::clamp<long long>(ms, 0, 20));
  if (event_ != nullptr) {
    ssh_event_dopoll(event_, wait_ms);
    return;
  }
  socket_t fd = ssh_get_fd(session_);  // fallback: plain wait
  if (fd == SSH_INVALID_SOCKET) return;
  struct pollfd p {};
  p.fd = fd;
  p.events = POLLIN;
  ::poll(&p, 1, wait_ms);
}

void SessionPump::Detach() {
  if (event_ == nullptr) return;
  ssh_event_remove_session(event_, session_);
  ssh_event_free(event_);
  event_ = nullptr;
}

void FreeSftp(sftp_session sftp) { sftp_free(sftp); }

size_t WriteAll(ssh_channel ch, std::string_view data) {
  size_t off = 0;
  while (off < data.size()) {
    const uint32_t n = static_cast<uint32_t>(std::min<size_t>(data.size() - off, 32768));
    const int w = ssh_channel_write(ch, data.data() + off, n);
    if (w == SSH_ERROR) break;
    off += static_cast<size_t>(w);
  }
  return off;
}

void DrainStream(ssh_channel ch, int is_stderr) {
  char buf[4096];
  while (ssh_channel_read_nonblocking(ch, buf, sizeof(buf), is_stderr) > 0) {
  }
}

}  // namespace npuprof::ssh::internal
