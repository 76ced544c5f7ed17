// SSH layer counters (see ssh_stats.h) and the TCP byte counts of a socket.
#include "workers/ssh/ssh_stats.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>

#include <fmt/format.h>

#include "workers/ssh/ssh_internal.h"

namespace npuprof::ssh {
namespace {

using internal::Stat;
constexpr int kNumStats = static_cast<int>(Stat::kCount);

std::atomic<int64_t> g_process[kNumStats];

SshStats FromArray(const int64_t (&v)[kNumStats]) {
  SshStats s;
  s.handshakes = v[static_cast<int>(Stat::kHandshakes)];
  s.commands = v[static_cast<int>(Stat::kCommands)];
  s.exec_channels = v[static_cast<int>(Stat::kExecChannels)];
  s.shell_channels = v[static_cast<int>(Stat::kShellChannels)];
  s.forward_channels = v[static_cast<int>(Stat::kForwardChannels)];
  s.sftp_sessions = v[static_cast<int>(Stat::kSftpSessions)];
  s.sftp_ops = v[static_cast<int>(Stat::kSftpOps)];
  s.payload_out = v[static_cast<int>(Stat::kPayloadOut)];
  s.payload_in = v[static_cast<int>(Stat::kPayloadIn)];
  s.wire_out = v[static_cast<int>(Stat::kWireOut)];
  s.wire_in = v[static_cast<int>(Stat::kWireIn)];
  s.busy_us = v[static_cast<int>(Stat::kBusyUs)];
  return s;
}

}  // namespace

SshStats SshStats::operator-(const SshStats& o) const {
  SshStats d;
  d.handshakes = handshakes - o.handshakes;
  d.commands = commands - o.commands;
  d.exec_channels = exec_channels - o.exec_channels;
  d.shell_channels = shell_channels - o.shell_channels;
  d.forward_channels = forward_channels - o.forward_channels;
  d.sftp_sessions = sftp_sessions - o.sftp_sessions;
  d.sftp_ops = sftp_ops - o.sftp_ops;
  d.payload_out = payload_out - o.payload_out;
  d.payload_in = payload_in - o.payload_in;
  d.wire_out = wire_out - o.wire_out;
  d.wire_in = wire_in - o.wire_in;
  d.busy_us = busy_us - o.busy_us;
  return d;
}

SshStats& SshStats::operator+=(const SshStats& o) {
  handshakes += o.handshakes;
  commands += o.commands;
  exec_channels += o.exec_channels;
  shell_channels += o.shell_channels;
  forward_channels += o.forward_channels;
  sftp_sessions += o.sftp_sessions;
  sftp_ops += o.sftp_ops;
  payload_out += o.payload_out;
  payload_in += o.payload_in;
  wire_out += o.wire_out;
  wire_in += o.wire_in;
  busy_us += o.busy_us;
  return *this;
}

SshStats ProcessSshStats() {
  int64_t v[kNumStats];
  for (int i = 0; i < kNumStats; ++i) v[i] = g_process[i].load(std::memory_order_relaxed);
  return FromArray(v);
}

namespace internal {

struct StatsSink {
  std::atomic<int64_t> v[kNumStats] = {};
};

// The scope of the calling thread (null when none).
thread_local std::shared_ptr<StatsSink> t_sink;

std::shared_ptr<StatsSink> CurrentSink() { return t_sink; }

}  // namespace internal

SshStatsScope::SshStatsScope() : sink_(std::make_shared<internal::StatsSink>()), prev_(internal::t_sink) {
  internal::t_sink = sink_;
}

SshStatsScope::~SshStatsScope() { internal::t_sink = prev_; }

SshStats SshStatsScope::totals() const {
  int64_t v[kNumStats];
  for (int i = 0; i < kNumStats; ++i) v[i] = sink_->v[i].load(std::memory_order_relaxed);
  return FromArray(v);
}

std::string FormatSshStats(const SshStats& s) {
  return fmt::format(
      "handshakes={} exec={} exec_channels={} shells={} fwd={} sftp_sessions={} sftp_ops={} payload_out={} payload_in={} wire_out={} "
      "wire_in={} ssh_ms={}",
      s.handshakes, s.commands, s.exec_channels, s.shell_channels, s.forward_channels, s.sftp_sessions, s.sftp_ops, s.payload_out,
      s.payload_in, s.wire_out, s.wire_in, s.busy_us / 1000);
}

namespace internal {

void Count(Stat what, int64_t n, StatsSink* fallback) {
  const int i = static_cast<int>(what);
  g_process[i].fetch_add(n, std::memory_order_relaxed);
  StatsSink* sink = t_sink ? t_sink.get() : fallback;
  if (sink != nullptr) sink->v[i].fetch_add(n, std::memory_order_relaxed);
}

bool TcpBytes(int fd, uint64_t* sent, uint64_t* received) {
  struct tcp_info info {};
  socklen_t len = sizeof(info);
  if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  // Older kernels return a shorter struct without the byte counters.
  if (len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received)) return false;
  *sent = info.tcpi_bytes_acked;
  *received = info.tcpi_bytes_received;
  return true;
}

}  // namespace internal
}  // namespace npuprof::ssh
