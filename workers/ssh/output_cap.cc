#include "workers/ssh/output_cap.h"

#include <algorithm>

#include <fmt/format.h>

namespace npuprof::ssh {

OutputCap::OutputCap(size_t cap) : cap_(std::max(cap, kMinCap)), head_(cap_ / 2) {}

void OutputCap::DropMiddle(std::string& buf) {
  if (buf.size() <= cap_) return;
  const size_t drop = buf.size() - cap_;
  buf.erase(head_, drop);
  omitted_ += drop;
}

void OutputCap::Trim(std::string& buf) {
  if (buf.size() > cap_ + cap_ / 2) DropMiddle(buf);
}

uint64_t OutputCap::Finish(std::string& buf) {
  DropMiddle(buf);
  if (omitted_ > 0) buf.insert(std::min(head_, buf.size()), OmittedMarker(omitted_));
  return omitted_;
}

std::string OmittedMarker(uint64_t omitted) {
  return fmt::format("\n[npuprof: {} bytes left out here]\n", omitted);
}

}  // namespace npuprof::ssh
