// SSH layer counters (see ssh_stats.h) and the TCP byte counts of a socket.
#include "workers/ssh/ssh_stats.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <iterator>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "workers/ssh/ssh_internal.h"

namespace npuprof::ssh {
namespace {

using internal::Stat;
constexpr int kNumStats = static_cast<int>(Stat::kCount);

std::atomic<int64_t> g_process[kNumStats];

// The counter behind each Stat, in Stat order: the one list of fields that
// FromArray, operator- and operator+= walk.
constexpr int64_t SshStats::*kFields[] = {
    &SshStats::handshakes,  &SshStats::commands,    &SshStats::exec_channels, &SshStats::shell_channels,
    &SshStats::forward_channels, &SshStats::sftp_sessions, &SshStats::sftp_ops, &SshStats::payload_out,
    &SshStats::payload_in,  &SshStats::wire_out,    &SshStats::wire_in,       &SshStats::round_trips,
    &SshStats::busy_us,
};
static_assert(std::size(kFields) == kNumStats, "one SshStats field per Stat, in Stat order");
static_assert(static_cast<int>(Stat::kHandshakes) == 0 && static_cast<int>(Stat::kBusyUs) == kNumStats - 1);

SshStats FromArray(const int64_t (&v)[kNumStats]) {
  SshStats s;
  for (int i = 0; i < kNumStats; ++i) s.*kFields[i] = v[i];
  return s;
}

}  // namespace

SshStats SshStats::operator-(const SshStats& o) const {
  SshStats d;
  for (auto f : kFields) d.*f = this->*f - o.*f;
  return d;
}

SshStats& SshStats::operator+=(const SshStats& o) {
  for (auto f : kFields) this->*f += o.*f;
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
      "wire_in={} round_trips={} ssh_ms={}",
      s.handshakes, s.commands, s.exec_channels, s.shell_channels, s.forward_channels, s.sftp_sessions, s.sftp_ops, s.payload_out,
      s.payload_in, s.wire_out, s.wire_in, s.round_trips, s.busy_us / 1000);
}

namespace internal {

namespace {
std::mutex g_lent_mu;
std::map<const void*, std::shared_ptr<StatsSink>>& Lent() {
  static auto* m = new std::map<const void*, std::shared_ptr<StatsSink>>();
  return *m;
}
}  // namespace

void LentTo(const void* session, std::shared_ptr<StatsSink> sink) {
  std::lock_guard<std::mutex> lock(g_lent_mu);
  if (sink) Lent()[session] = std::move(sink);
  else Lent().erase(session);
}

void Unlent(const void* session) {
  std::lock_guard<std::mutex> lock(g_lent_mu);
  Lent().erase(session);
}

StatsSink* SessionSink(const void* session, StatsSink* creator) {
  if (t_sink) return creator;  // Count uses the thread's scope anyway
  std::lock_guard<std::mutex> lock(g_lent_mu);
  auto it = Lent().find(session);
  return it == Lent().end() ? creator : it->second.get();  // the borrower's scope outlives its loan
}

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
