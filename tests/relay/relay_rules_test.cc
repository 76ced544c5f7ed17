// The relay's pure rules (tests/support/relay_link.h) and the far link the
// environment asks the harness for (tests/support/link_env.h).
#include <gtest/gtest.h>

#include "bench/turn_attribution.h"
#include "tests/support/link_env.h"
#include "tests/support/relay_link.h"

namespace npuprof::testing {
namespace {

TEST(LinkSchedule, EachChunkIsDueTheDelayAfterItWasReadNotAfterThePreviousOne) {
  LinkSchedule link(50000, 0);
  EXPECT_EQ(link.DueAt(1000, 100), 51000);
  EXPECT_EQ(link.DueAt(1001, 100), 51001);  // in flight together: bandwidth kept
  EXPECT_EQ(link.DueAt(90000, 0), 140000);  // an end of stream is delayed like data
}

TEST(LinkSchedule, DueTimesNeverGoBackwards) {
  LinkSchedule link(1000, 1000);  // 1 ms, 1000 bytes/s
  const int64_t a = link.DueAt(0, 1000);  // on the link 1 s
  const int64_t b = link.DueAt(10, 1);    // read later, waits for the link
  EXPECT_EQ(a, 1000000 + 1000);
  EXPECT_EQ(b, 1001000 + 1000);
  EXPECT_GE(b, a);
}

TEST(LinkSchedule, ACapSerialisesTheLinkAndAnIdleLinkStartsAtOnce) {
  LinkSchedule link(0, 2000);  // 2000 bytes/s, no delay
  EXPECT_EQ(link.DueAt(0, 1000), 500000);
  EXPECT_EQ(link.DueAt(0, 1000), 1000000);        // queued behind the first
  EXPECT_EQ(link.DueAt(5000000, 1000), 5500000);  // idle meanwhile: no backlog
}

TEST(TurnCounter, CountsEachAnswerAfterARequestOnce) {
  using D = TurnCounter::Direction;
  TurnCounter t;
  EXPECT_FALSE(t.OnData(D::kToClient));  // a banner before anything was asked: no turn
  EXPECT_FALSE(t.OnData(D::kToServer));
  EXPECT_FALSE(t.OnData(D::kToServer));  // one request in two chunks
  EXPECT_TRUE(t.OnData(D::kToClient));
  EXPECT_FALSE(t.OnData(D::kToClient));  // the answer's second chunk
  EXPECT_FALSE(t.OnData(D::kToServer));
  EXPECT_TRUE(t.OnData(D::kToClient));
  EXPECT_EQ(t.turns(), 2u);
}

TEST(TestLinkFromEnv, UnsetOrEmptyMeansNoRelay) {
  auto r = TestLinkFromEnv(nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  r = TestLinkFromEnv("", "");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(TestLinkFromEnv, TheRoundTripIsSplitIntoTwoDelays) {
  auto r = TestLinkFromEnv("100", nullptr);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->one_way_us, 50000);
  EXPECT_EQ((*r)->bytes_per_s, 0);
  r = TestLinkFromEnv("0", "1250000");  // a relay that only counts, with a cap
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->one_way_us, 0);
  EXPECT_EQ((*r)->bytes_per_s, 1250000);
  r = TestLinkFromEnv("101", nullptr);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->one_way_us, 50500);
}

TEST(TestLinkFromEnv, BadValuesNameTheVariableAndTheFix) {
  for (const char* bad : {"abc", "-5", "1.5", "60001", "99999999999999999999"}) {
    auto r = TestLinkFromEnv(bad, nullptr);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("NPUPROF_TEST_RTT_MS"), std::string::npos);
    EXPECT_NE(r.status().message().find("unset it"), std::string::npos);
  }
  for (const char* bad : {"0", "x", "-1"}) {
    auto r = TestLinkFromEnv("50", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("NPUPROF_TEST_LINK_BYTES_PER_S"), std::string::npos);
  }
}

TEST(TurnsByTaskKind, ATurnCountsToTheKindsInFlightAndTheRestIsBetweenTasks) {
  using bench::TaskSpan;
  const std::vector<TaskSpan> spans = {{"launch", 100, 200}, {"analyse_rank", 300, 400}, {"analyse_rank", 350, 450},
                                       {"stop", 440, 500}};
  const auto by = bench::TurnsByTaskKind({50, 150, 160, 250, 320, 360, 445, 600}, spans, 100, 500);
  EXPECT_EQ(by.size(), 4u);
  EXPECT_DOUBLE_EQ(by.at("launch"), 2);
  EXPECT_DOUBLE_EQ(by.at(bench::kBetweenTasks), 1);  // 250; 50 and 600 are outside the run
  EXPECT_DOUBLE_EQ(by.at("analyse_rank"), 1 + 1 + 0.5);  // 320 alone, 360 two of them, 445 shared with stop
  EXPECT_DOUBLE_EQ(by.at("stop"), 0.5);
  EXPECT_TRUE(bench::TurnsByTaskKind({}, spans, 0, 1000).empty());
}

TEST(SpanSecondsByKind, OverlappingAttemptsOfAKindCountOnce) {
  const auto by = bench::SpanSecondsByKind(
      {{"launch", 0, 1000}, {"analyse_rank", 2000, 3000}, {"analyse_rank", 2500, 3500}, {"analyse_rank", 5000, 5250}});
  EXPECT_DOUBLE_EQ(by.at("launch"), 1.0);
  EXPECT_DOUBLE_EQ(by.at("analyse_rank"), 1.5 + 0.25);
  EXPECT_TRUE(bench::SpanSecondsByKind({}).empty());
}

}  // namespace
}  // namespace npuprof::testing
