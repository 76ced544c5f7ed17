// TimerQueue: armed run timers ordered by deadline. The timers themselves are
// events (TimerScheduled / TaskRetryScheduled); this is only the in-memory
// index used to fire them, rebuilt from the runs' states on recovery.
#pragma once

#include <cstdint>
#include <queue>
#include <string>
#include <vector>

namespace npuprof::broker {

struct TimerEntry {
  int64_t deadline_ms;
  std::string run_id;
  std::string timer_id;
  bool operator>(const TimerEntry& o) const { return deadline_ms > o.deadline_ms; }
};

class TimerQueue {
 public:
  void Push(TimerEntry e) { heap_.push(std::move(e)); }
  // Pops every entry due at now_ms.
  std::vector<TimerEntry> PopDue(int64_t now_ms) {
    std::vector<TimerEntry> out;
    while (!heap_.empty() && heap_.top().deadline_ms <= now_ms) {
      out.push_back(heap_.top());
      heap_.pop();
    }
    return out;
  }
  // Milliseconds until the next deadline (or fallback when empty), >= 0.
  int64_t MsUntilNext(int64_t now_ms, int64_t fallback) const {
    if (heap_.empty()) return fallback;
    int64_t d = heap_.top().deadline_ms - now_ms;
    return d < 0 ? 0 : (d < fallback ? d : fallback);
  }
  size_t size() const { return heap_.size(); }

 private:
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> heap_;
};

}  // namespace npuprof::broker
