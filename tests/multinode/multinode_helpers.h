// Helpers shared by the multi-node end-to-end tests (tests/multinode/):
// the small model every deployment serves, and the check that no process of
// a run is left on any simulated host.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/support/npuprof_harness.h"

namespace npuprof::testing {

inline std::string Model(NpuprofHarness& h) {
  return h.MakeModel({"--layers", "2", "--hidden", "512", "--intermediate", "1024", "--vocab", "8000", "--heads", "8",
                      "--kv-heads", "2", "--head-dim", "64"});
}

// Every node's processes gone (the harness's targets carry their markers).
inline void ExpectNothingLeft(NpuprofHarness& h) {
  const auto left = h.TargetProcessesAfter(30);
  EXPECT_TRUE(left.empty()) << left.size() << " processes left on the simulated hosts";
  for (const std::string& n : h.NodeNames()) EXPECT_TRUE(h.LiveServicePids(n).empty()) << n;
}

}  // namespace npuprof::testing
