// Refusals are logged once per peer per interval, with what was not logged.
#include "broker/refusal_log.h"

#include <gtest/gtest.h>

namespace npuprof::broker {
namespace {

TEST(RefusalLog, FirstRefusalOfAPeerIsLoggedThenOncePerInterval) {
  RefusalLog log(60'000);
  uint64_t suppressed = 99;
  EXPECT_TRUE(log.ShouldLog("k1 10.0.0.5", 1000, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(log.ShouldLog("k1 10.0.0.5", 1000 + i * 100, &suppressed));
  EXPECT_TRUE(log.ShouldLog("k2 10.0.0.5", 1500, &suppressed));  // another peer: its own line
  EXPECT_TRUE(log.ShouldLog("k1 10.0.0.5", 61'000, &suppressed));
  EXPECT_EQ(suppressed, 5u);
  EXPECT_FALSE(log.ShouldLog("k1 10.0.0.5", 61'001, &suppressed));
}

TEST(RefusalLog, StaysBounded) {
  RefusalLog log(60'000, 3);
  uint64_t s = 0;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(log.ShouldLog("peer" + std::to_string(i), 0, &s));
  // Forgotten peers are logged again rather than kept without bound.
  EXPECT_TRUE(log.ShouldLog("peer0", 1, &s));
}

}  // namespace
}  // namespace npuprof::broker
