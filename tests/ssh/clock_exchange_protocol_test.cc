// The clock exchange protocol (workers/ssh/clock_exchange_protocol.h): the
// ready line, reply parsing (every method, garbage refused), the best sample
// and the script's quoting, all without a target (against a loopback sshd:
// clock_exchange_test.cc).
#include <gtest/gtest.h>

#include "workers/ssh/clock_exchange_protocol.h"

namespace npuprof::ssh {
namespace {

TEST(ClockExchangeProtocol, ReadyLineAfterRcFileNoise) {
  auto r = FindClockReady("motd noise\n\nabc123 python\n17", "abc123");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->method, ClockMethod::kPython);
  EXPECT_EQ((*r)->end, std::string("motd noise\n\nabc123 python\n").size());
  r = FindClockReady("\nabc123 bash\n", "abc123");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->method, ClockMethod::kBash);
  r = FindClockReady("\nabc123 date\n", "abc123");
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->method, ClockMethod::kDate);
}

TEST(ClockExchangeProtocol, ReadyLineIncompleteOrForeignIsNotReady) {
  for (const char* out : {"", "\nabc123 pyth", "abc123 python\n", "\nabc12 python\n", "\nother python\n"}) {
    auto r = FindClockReady(out, "abc123");
    ASSERT_TRUE(r.ok()) << out;
    EXPECT_FALSE(r->has_value()) << out;
  }
}

TEST(ClockExchangeProtocol, ReadyLineWithAnUnknownMethodIsAnError) {
  auto r = FindClockReady("\nabc123 perl\n", "abc123");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown method 'perl'"), std::string::npos) << r.status().message();
  r = FindClockReady("\nabc123 " + std::string(40, 'x'), "abc123");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("names no method"), std::string::npos) << r.status().message();
}

TEST(ClockExchangeProtocol, NanosecondRepliesOfPythonAndDate) {
  auto r = ParseClockReply("1796558249671793921", ClockMethod::kPython);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 1796558249671793921);
  r = ParseClockReply("1796558249671793921\r", ClockMethod::kDate);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 1796558249671793921);
}

TEST(ClockExchangeProtocol, BashRepliesWithEitherDecimalSeparator) {
  auto r = ParseClockReply("1796558249.671793", ClockMethod::kBash);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 1796558249671793000);
  r = ParseClockReply("1796558249,671793", ClockMethod::kBash);  // a locale with a decimal comma
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 1796558249671793000);
  r = ParseClockReply("1796558249.5", ClockMethod::kBash);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 1796558249500000000);
}

TEST(ClockExchangeProtocol, GarbageRepliesAreRefusedShowingWhatCameBack) {
  struct Case {
    std::string line;
    ClockMethod method;
  };
  for (const Case& c : std::vector<Case>{{"", ClockMethod::kPython},
                                         {"1796558249N", ClockMethod::kDate},  // a date without %N
                                         {"-5", ClockMethod::kPython},
                                         {"12 34", ClockMethod::kPython},
                                         {"99999999999999999999", ClockMethod::kPython},  // past int64
                                         {"1796558249.671793", ClockMethod::kPython},
                                         {"1796558249671793921", ClockMethod::kBash},
                                         {"1796558249.", ClockMethod::kBash},
                                         {".5", ClockMethod::kBash},
                                         {"1796558249.6717930001", ClockMethod::kBash},
                                         {"17965\x01\xff", ClockMethod::kPython}}) {
    auto r = ParseClockReply(c.line, c.method);
    EXPECT_FALSE(r.ok()) << c.line;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(ClockMethodName(c.method)), std::string::npos);
    }
  }
  auto r = ParseClockReply("17965\x01\xff", ClockMethod::kPython);
  EXPECT_NE(r.status().message().find("'17965\\x01\\xff'"), std::string::npos) << r.status().message();
  r = ParseClockReply(std::string(65, '1'), ClockMethod::kPython);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("longer than 64 bytes"), std::string::npos) << r.status().message();
}

TEST(ClockExchangeProtocol, TheShortestRoundTripIsKept) {
  const int64_t base_us = 1796558249000000;
  // Remote 3.2 s ahead; each sample reads it somewhere in its round trip.
  std::vector<ClockSample> s = {
      {base_us, (base_us + 3200000 + 30000) * 1000, base_us + 40000, ClockMethod::kPython},  // rtt 40 ms
      {base_us + 100000, (base_us + 100000 + 3200000 + 1000) * 1000 + 250, base_us + 102000,
       ClockMethod::kPython},                                                                 // rtt 2 ms
      {base_us + 200000, (base_us + 200000 + 3200000) * 1000, base_us + 205000, ClockMethod::kPython},
  };
  auto e = BestClockEstimate(s);
  ASSERT_TRUE(e.has_value());
  EXPECT_DOUBLE_EQ(e->rtt_ms, 2.0);
  EXPECT_DOUBLE_EQ(e->uncertainty_ms, 1.0);
  EXPECT_DOUBLE_EQ(e->offset_ms, 3200.00025);  // remote - midpoint, to the ns
  EXPECT_EQ(e->method, ClockMethod::kPython);
}

TEST(ClockExchangeProtocol, NoUsableSampleIsNoEstimate) {
  EXPECT_FALSE(BestClockEstimate({}).has_value());
  EXPECT_FALSE(BestClockEstimate({{100, 5, 50, ClockMethod::kDate}}).has_value());  // t1 before t0
}

TEST(ClockExchangeProtocol, TheScriptQuotesItsPartsAndSourcesTheEnvScript) {
  const std::string s = ClockExchangeScript("00ff", ClockMethod::kAuto, "/opt/it's/set_env.sh");
  EXPECT_NE(s.find("__np_r=00ff;"), std::string::npos) << s;
  EXPECT_NE(s.find("__np_m=auto;"), std::string::npos) << s;
  EXPECT_NE(s.find("'/opt/it'\\''s/set_env.sh'"), std::string::npos) << s;
  EXPECT_EQ(s.find("__np_m=auto"), s.find("__np_r=") + std::string("__np_r=00ff; ").size());
  EXPECT_EQ(ClockExchangeScript("00ff", ClockMethod::kBash).find("set_env"), std::string::npos);
  EXPECT_NE(ClockExchangeScript("00ff", ClockMethod::kDate).find("__np_m=date;"), std::string::npos);
}

TEST(ClockExchangeProtocol, ShownBytesAreEscapedAndCut) {
  EXPECT_EQ(ShowReplyBytes("ab\n\\"), "ab\\x0a\\x5c");
  EXPECT_EQ(ShowReplyBytes("abcdef", 3), "abc...");
}

}  // namespace
}  // namespace npuprof::ssh
