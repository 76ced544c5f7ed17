// Waits between polls of something remote that finishes at an unknown time
// (the flush waits' rounds, the readiness wait's steps, a pid file): the
// first wait is short, each next one doubles up to a cap. A poll costs a few
// ms on the session's command shell or an SFTP stat, so the early fast polls
// are cheap, and a step that is done almost at once is noticed within ~50 ms
// instead of one full poll period. Waits whose polls can run on the target
// use workers/remote_wait.h instead. Pure: it only computes durations.
#pragma once

#include <algorithm>
#include <chrono>

namespace npuprof::workers {

class PollBackoff {
 public:
  explicit PollBackoff(std::chrono::milliseconds cap,
                       std::chrono::milliseconds first = std::chrono::milliseconds(50))
      : next_(std::min(first, cap)), cap_(cap) {}
  // The wait before the next poll: first, 2*first, 4*first, ... then cap.
  std::chrono::milliseconds Next() {
    const auto d = next_;
    next_ = std::min(next_ * 2, cap_);
    return d;
  }

 private:
  std::chrono::milliseconds next_;
  std::chrono::milliseconds cap_;
};

}  // namespace npuprof::workers
