// OutputCap (pure): exact within the cap; beyond it the first and last
// halves with a marker, the same however the stream arrives in chunks.
#include "workers/ssh/output_cap.h"

#include <gtest/gtest.h>

#include <string>

namespace npuprof::ssh {
namespace {

std::string Stream(size_t n) {
  std::string s;
  for (size_t i = 0; s.size() < n; ++i) s += std::to_string(i) + "\n";
  s.resize(n);
  return s;
}

std::string Capped(const std::string& stream, size_t cap, size_t chunk, uint64_t* omitted) {
  OutputCap c(cap);
  std::string buf;
  for (size_t at = 0; at < stream.size(); at += chunk) {
    buf.append(stream, at, chunk);
    c.Trim(buf);
    EXPECT_LE(buf.size(), c.cap() + c.cap() / 2 + chunk);
  }
  *omitted = c.Finish(buf);
  return buf;
}

TEST(OutputCap, WithinTheCapTheStreamIsExact) {
  uint64_t omitted = 1;
  for (size_t n : {size_t{0}, size_t{10}, size_t{8191}, size_t{8192}}) {
    const std::string s = Stream(n);
    EXPECT_EQ(Capped(s, 8192, 1000, &omitted), s);
    EXPECT_EQ(omitted, 0u);
  }
}

TEST(OutputCap, BeyondTheCapHeadMarkerTail) {
  const std::string s = Stream(100000);
  for (size_t chunk : {size_t{1}, size_t{777}, size_t{4096}, size_t{100000}}) {
    uint64_t omitted = 0;
    const std::string got = Capped(s, 8192, chunk, &omitted);
    EXPECT_EQ(omitted, 100000u - 8192u) << chunk;
    EXPECT_EQ(got, s.substr(0, 4096) + OmittedMarker(omitted) + s.substr(s.size() - 4096)) << chunk;
  }
}

TEST(OutputCap, CallerMayCutTheEndBeforeFinish) {
  // As the command shell does: cut its end marker off, then Finish.
  const std::string s = Stream(50000);
  OutputCap c(8192);
  std::string buf;
  for (size_t at = 0; at < s.size(); at += 3000) {
    buf.append(s, at, 3000);
    c.Trim(buf);
  }
  buf.resize(buf.size() - 100);
  const uint64_t omitted = c.Finish(buf);
  // One contiguous middle part left out; the tail is what remains of the last half-cap.
  const std::string kept = s.substr(0, s.size() - 100);
  ASSERT_GT(omitted, 0u);
  EXPECT_TRUE(buf == kept.substr(0, 4096) + OmittedMarker(omitted) + kept.substr(4096 + omitted));
  EXPECT_LE(kept.size() - 4096 - omitted, 4096u);
}

TEST(OutputCap, TinyCapsCountAsTheMinimum) {
  OutputCap c(1);
  EXPECT_EQ(c.cap(), OutputCap::kMinCap);
  EXPECT_EQ(OmittedMarker(12), "\n[npuprof: 12 bytes left out here]\n");
}

}  // namespace
}  // namespace npuprof::ssh
