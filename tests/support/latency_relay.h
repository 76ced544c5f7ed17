// LatencyRelay: a far link for tests and benchmarks. It listens on a
// loopback address and port, forwards each accepted TCP connection to an
// upstream address and port (a test sshd), and holds every chunk it reads
// for a fixed delay before writing it on, in each direction (round trip
// time = 2 x delay). Chunks overlap in flight, so order and bandwidth are
// kept; an optional cap limits the bytes per second of each direction,
// shared by all connections like one link (relay_link.h: the rules).
//
// It counts, per connection and in total, the bytes each way and the turns
// (relay_link.h TurnCounter: the sequential round trips a client waited
// for), with the wall-clock time of every turn so a benchmark can place
// them against a run's task events. Stats() is a snapshot, safe from any
// thread; StatsJson() the same as JSON (the stats file of WriteStats).
//
// One thread runs every socket (poll). An upstream that does not accept
// within connect_timeout_ms (stopped sshd) closes the client's connection;
// a side that resets or fails closes both sides at once; an end of stream
// is forwarded, delayed like data, as a half close. Stop() (and the
// destructor) closes every socket it opened and joins the thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::testing {

struct RelayOptions {
  std::string listen_address = "127.0.0.1";
  int listen_port = 0;  // 0: a free port the kernel picks (port() says which)
  std::string upstream_address = "127.0.0.1";
  int upstream_port = 0;
  int64_t delay_us = 0;       // each way
  int64_t bytes_per_s = 0;    // per direction, all connections together; 0 = no cap
  int connect_timeout_ms = 5000;
  // Bytes read but not yet written, per connection and direction, beyond
  // which the relay stops reading that side (the sender then waits, as on
  // a full TCP window).
  size_t max_in_flight = 8 << 20;
};

struct RelayConnectionStats {
  uint64_t id = 0;  // 1, 2, ... in accept order
  int64_t opened_ms = 0;   // wall clock, ms since the epoch
  int64_t closed_ms = -1;  // -1 while open
  uint64_t bytes_to_server = 0, bytes_to_client = 0;
  uint64_t turns = 0;
  std::vector<int64_t> turn_ms;  // wall clock of each turn (its answer's first chunk read)
};

struct RelayStats {
  uint64_t connections = 0, open_connections = 0, refused = 0;  // refused: upstream did not accept
  uint64_t bytes_to_server = 0, bytes_to_client = 0, turns = 0;
  std::vector<RelayConnectionStats> per_connection;
};

nlohmann::json RelayStatsJson(const RelayStats& s);

class LatencyRelay {
 public:
  explicit LatencyRelay(RelayOptions options);
  ~LatencyRelay();
  LatencyRelay(const LatencyRelay&) = delete;
  LatencyRelay& operator=(const LatencyRelay&) = delete;

  // Binds and listens, then starts the thread; the port accepts on return.
  Status Start();
  // Closes every socket and joins the thread; idempotent.
  void Stop();

  const std::string& address() const { return options_.listen_address; }
  int port() const { return port_; }
  const RelayOptions& options() const { return options_; }

  RelayStats Stats() const;
  // The stats as JSON to `path` (written to a temp name, then renamed).
  Status WriteStats(const std::string& path) const;

 private:
  struct Loop;
  void Run();

  RelayOptions options_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  RelayStats stats_;  // guarded by mu_
};

}  // namespace npuprof::testing
