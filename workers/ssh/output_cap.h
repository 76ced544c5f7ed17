// OutputCap: keeps remote output that is read into a growing buffer within a
// cap (pure: no I/O). A stream longer than the cap keeps its first half-cap
// bytes and its last half-cap bytes; Finish puts a marker between them that
// says how many bytes were left out. A stream within the cap stays exact.
//
// Use: append each chunk to the buffer, then Trim(buffer) (the buffer may be
// searched between the two: Trim keeps at least the last half-cap bytes, so
// an end marker shorter than that is never cut); at the end Finish(buffer),
// after the caller has cut anything it does not want off its end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace npuprof::ssh {

class OutputCap {
 public:
  static constexpr size_t kMinCap = 4096;
  explicit OutputCap(size_t cap);  // cap < kMinCap counts as kMinCap

  // Once buf holds more than 1.5 x cap bytes, drops its middle: buf becomes
  // the stream's first cap/2 bytes and buf's last cap - cap/2 bytes.
  void Trim(std::string& buf);
  // Cuts buf down to the cap the same way and, if anything was left out at
  // any time, inserts OmittedMarker there. Returns the bytes left out.
  uint64_t Finish(std::string& buf);
  uint64_t omitted() const { return omitted_; }
  size_t cap() const { return cap_; }

 private:
  void DropMiddle(std::string& buf);

  size_t cap_;
  size_t head_;
  uint64_t omitted_ = 0;
};

// "\n[npuprof: N bytes left out here]\n": what stands for the middle of a
// capped stream or file (ASCII, so it is valid text in any shown field).
std::string OmittedMarker(uint64_t omitted);

}  // namespace npuprof::ssh
