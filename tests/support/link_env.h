// The far link the environment asks the test harness for: every
// NpuprofHarness puts its simulated hosts behind a latency relay
// (latency_relay.h) when NPUPROF_TEST_RTT_MS is set, so any existing
// end-to-end test runs against a far target unchanged:
//
//   NPUPROF_TEST_RTT_MS=100 ctest -R TorchProfileE2E   # 50 ms each way
//   NPUPROF_TEST_LINK_BYTES_PER_S=1250000              # and 10 Mbit/s each way
//
// Unset (or empty) = no relay: npuprof talks to each sshd directly, as
// always. Pure: the values are passed in, nothing is read here.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/status.h"

namespace npuprof::testing {

struct TestLink {
  int64_t one_way_us = 0;
  int64_t bytes_per_s = 0;  // 0 = no cap
};

namespace link_env_detail {
// A whole decimal number in [0, max], or nullopt.
inline std::optional<int64_t> WholeNumber(const std::string& s, int64_t max) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const int64_t v = std::strtoll(s.c_str(), nullptr, 10);
  return v <= max ? std::optional<int64_t>(v) : std::nullopt;
}
}  // namespace link_env_detail

// rtt_ms / bytes_per_s: the variables' values (nullptr when unset).
// nullopt: no relay. An error names the variable and what it takes.
inline Result<std::optional<TestLink>> TestLinkFromEnv(const char* rtt_ms, const char* bytes_per_s) {
  const bool has_rtt = rtt_ms != nullptr && *rtt_ms != '\0';
  const bool has_bps = bytes_per_s != nullptr && *bytes_per_s != '\0';
  if (!has_rtt && !has_bps) return std::optional<TestLink>();
  TestLink link;
  if (has_rtt) {
    const auto v = link_env_detail::WholeNumber(rtt_ms, 60000);
    if (!v)
      return Status::Invalid(std::string("NPUPROF_TEST_RTT_MS='") + rtt_ms +
                             "': give the round trip time in whole milliseconds, 0 to 60000, or unset it");
    link.one_way_us = *v * 1000 / 2;
  }
  if (has_bps) {
    const auto v = link_env_detail::WholeNumber(bytes_per_s, int64_t{1} << 40);
    if (!v || *v == 0)
      return Status::Invalid(std::string("NPUPROF_TEST_LINK_BYTES_PER_S='") + bytes_per_s +
                             "': give bytes per second per direction, a whole number above 0, or unset it");
    link.bytes_per_s = *v;
  }
  return std::optional<TestLink>(link);
}

}  // namespace npuprof::testing
