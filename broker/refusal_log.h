// RefusalLog: decides which refusals of a listener are written to the log.
// A refused peer reconnects (libzmq retries every 100 ms to a few seconds),
// so logging every attempt would flood the log: each distinct peer (its key
// and address, or the reason libzmq gives) is logged the first time, then
// at most once per interval with the number of refusals not logged since.
// Pure: time comes in.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace npuprof::broker {

class RefusalLog {
 public:
  explicit RefusalLog(int64_t interval_ms = 60'000, size_t max_peers = 4096)
      : interval_ms_(interval_ms), max_peers_(max_peers) {}

  // True when this refusal of peer should be logged now; *suppressed is then
  // the number of refusals of peer not logged since the last logged one.
  bool ShouldLog(const std::string& peer, int64_t now_ms, uint64_t* suppressed) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) {
      if (peers_.size() >= max_peers_) peers_.clear();  // bounded: forget everyone rather than grow
      peers_[peer] = Entry{now_ms, 0};
      *suppressed = 0;
      return true;
    }
    if (now_ms - it->second.last_logged_ms < interval_ms_) {
      ++it->second.suppressed;
      return false;
    }
    *suppressed = it->second.suppressed;
    it->second = Entry{now_ms, 0};
    return true;
  }

 private:
  struct Entry {
    int64_t last_logged_ms = 0;
    uint64_t suppressed = 0;
  };
  int64_t interval_ms_;
  size_t max_peers_;
  std::map<std::string, Entry> peers_;
};

}  // namespace npuprof::broker
