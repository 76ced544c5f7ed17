// PeekTopLevel: top-level members only, raw values, and no crash or
// over-read on any input.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "broker/metrics_payload_peek.h"

namespace npuprof::metrics {
namespace {

TEST(PayloadPeek, FindsTopLevelMembersOfEveryShape) {
  const std::string j =
      R"({"attempt":2,"kind":"probe.npu_smi","payload":{"kind":"nested","task_id":"no"},"list":[1,{"a":"]"}],)"
      R"("final":true,"none":null,"task_id":"r1.t3"})";
  EXPECT_EQ(PeekTopLevel(j, "kind"), "probe.npu_smi");
  EXPECT_EQ(PeekTopLevel(j, "attempt"), "2");
  EXPECT_EQ(PeekTopLevel(j, "final"), "true");
  EXPECT_EQ(PeekTopLevel(j, "none"), "null");
  EXPECT_EQ(PeekTopLevel(j, "task_id"), "r1.t3");  // not the nested one
  EXPECT_EQ(PeekTopLevel(j, "payload"), R"({"kind":"nested","task_id":"no"})");
  EXPECT_EQ(PeekTopLevel(j, "list"), R"([1,{"a":"]"}])");
  EXPECT_EQ(PeekTopLevel(j, "a"), std::nullopt);  // nested only
  EXPECT_EQ(PeekTopLevel(j, "missing"), std::nullopt);
}

TEST(PayloadPeek, ToleratesWhitespaceAndKeepsEscapesRaw) {
  const std::string j = " {\n \"reason\" : \"worker_lost\" ,\t\"error\": \"a \\\"quoted\\\" } brace\", \"n\" : -1.5e3 }";
  EXPECT_EQ(PeekTopLevel(j, "reason"), "worker_lost");
  EXPECT_EQ(PeekTopLevel(j, "error"), "a \\\"quoted\\\" } brace");
  EXPECT_EQ(PeekTopLevel(j, "n"), "-1.5e3");
}

TEST(PayloadPeek, NotAnObjectOrCutShortGivesNothing) {
  for (const char* bad : {"", "[]", "\"kind\"", "{", "{}", "{\"kind\"", "{\"kind\":", "{\"kind\":\"x",
                          "{\"a\":{\"b\":1}", "{\"a\" 1, \"kind\":\"x\"}", "{kind:\"x\"}", "{\"a\":1 \"kind\":\"x\"}"})
    EXPECT_EQ(PeekTopLevel(bad, "kind"), std::nullopt) << bad;
  // The first member is found even when the text is broken after it.
  EXPECT_EQ(PeekTopLevel("{\"kind\":\"x\",garbage", "kind"), "x");
}

TEST(PayloadPeek, RandomBytesNeverCrashOrReadPastTheText) {
  std::mt19937 rng(18);
  const std::string alphabet = "{}[]\":,\\ atrue0123456789kind";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 64, ' ');
    for (char& c : s) c = (i % 2) ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
    // Copied into a buffer of exactly its size: a read past it is caught by the sanitizers.
    const std::string exact(s);
    auto v = PeekTopLevel(exact, "kind");
    if (v) {
      EXPECT_GE(v->data(), exact.data());
      EXPECT_LE(v->data() + v->size(), exact.data() + exact.size());
    }
  }
}

}  // namespace
}  // namespace npuprof::metrics
