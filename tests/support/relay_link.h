// The two pure rules of the latency relay (tests/support/latency_relay.h),
// apart from its sockets so they are tested alone. No I/O, no clock: times
// are microseconds on whatever clock the caller reads.
//
// LinkSchedule: when a chunk read from one side is due on the other side.
// A chunk read at t is due at t + delay: the delay is added to each chunk,
// not served one chunk after another, so a long transfer keeps its
// bandwidth (chunks in flight overlap). With a bandwidth cap the link also
// has a serialisation time: a chunk starts onto the link when the previous
// one has left it (or when it was read, if later), occupies it for
// bytes / rate, and is due delay after it has left. Due times never go
// backwards, so order is kept.
//
// TurnCounter: the turns of one connection, i.e. how many times the
// traffic changed from client->server to server->client. Each turn is one
// round trip the client waited for, when the two sides take turns (a
// request, then its answer). Traffic both sides send unasked (SSH window
// adjustments, several channels at once) can add turns that were no wait;
// the figure is exact for strict request/answer traffic and an upper
// bound of the sequential round trips otherwise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace npuprof::testing {

class LinkSchedule {
 public:
  // delay_us: one way; bytes_per_s: 0 = no cap.
  LinkSchedule(int64_t delay_us, int64_t bytes_per_s) : delay_us_(delay_us), bytes_per_s_(bytes_per_s) {}

  // The time a chunk of `bytes` read at read_at_us is due at the other side.
  int64_t DueAt(int64_t read_at_us, size_t bytes) {
    int64_t leaves = read_at_us;
    if (bytes_per_s_ > 0) {
      const int64_t start = std::max(read_at_us, link_free_us_);
      leaves = start + static_cast<int64_t>(static_cast<double>(bytes) * 1e6 / static_cast<double>(bytes_per_s_));
      link_free_us_ = leaves;
    }
    const int64_t due = std::max(leaves + delay_us_, last_due_us_);
    last_due_us_ = due;
    return due;
  }

  int64_t delay_us() const { return delay_us_; }

 private:
  int64_t delay_us_;
  int64_t bytes_per_s_;
  int64_t link_free_us_ = 0;
  int64_t last_due_us_ = 0;
};

class TurnCounter {
 public:
  enum class Direction { kToServer, kToClient };

  // Data went `d`; true when this is a turn (server->client right after
  // client->server).
  bool OnData(Direction d) {
    const bool turn = d == Direction::kToClient && last_ == Last::kToServer;
    last_ = d == Direction::kToServer ? Last::kToServer : Last::kToClient;
    turns_ += turn ? 1 : 0;
    return turn;
  }

  uint64_t turns() const { return turns_; }

 private:
  enum class Last { kNone, kToServer, kToClient };
  Last last_ = Last::kNone;
  uint64_t turns_ = 0;
};

}  // namespace npuprof::testing
