// A task attempt's link figures (statemachine/task_link.h): decoded from a
// TaskSucceeded / TaskFailed payload with a Status (absent, present, bad),
// recorded by the engine with the attempt that sent them (a retried task's
// attempts each keep their own), never invented for an attempt no worker
// answered, and held to events.proto by the event schema.
#include <gtest/gtest.h>

#include "sm_test_util.h"
#include "statemachine/event_schema.h"
#include "statemachine/task_link.h"

namespace npuprof::sm::testing {
namespace {

json Figures(int64_t rts) {
  return {{"round_trips", rts}, {"commands", 2},     {"sftp_ops", 3},    {"http_requests", 1}, {"channel_opens", 1},
          {"handshakes", 0},    {"bytes_out", 4000}, {"bytes_in", 9000}, {"link_ms", 12}};
}

TEST(TaskLinkDecode, AnOldEventHasNoFiguresNotZeros) {
  for (const json& p : {json{{"task_id", "r1.t1"}, {"attempt", 1}}, json{{"task_id", "r1.t1"}, {"link", nullptr}},
                        json::array()}) {
    auto d = DecodeTaskLink("TaskSucceeded", p);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_FALSE(d->has_value()) << p.dump();
  }
}

TEST(TaskLinkDecode, ANewEventHasEveryFigure) {
  auto d = DecodeTaskLink("TaskFailed", json{{"task_id", "r1.t1"}, {"link", Figures(17)}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ((*d)->round_trips(), 17);
  EXPECT_EQ((*d)->commands(), 2);
  EXPECT_EQ((*d)->sftp_ops(), 3);
  EXPECT_EQ((*d)->http_requests(), 1);
  EXPECT_EQ((*d)->bytes_in(), 9000);
  EXPECT_EQ((*d)->link_ms(), 12);
  EXPECT_EQ(TaskLinkJson(**d), Figures(17));  // the recorded form round-trips
  // A figure not written reads 0 (proto3); a key a newer writer added is passed over.
  auto partial = DecodeTaskLink("TaskSucceeded", json{{"link", {{"round_trips", 5}, {"future_figure", "x"}}}});
  ASSERT_TRUE(partial.ok()) << partial.status().ToString();
  EXPECT_EQ((*partial)->round_trips(), 5);
  EXPECT_EQ((*partial)->commands(), 0);
}

TEST(TaskLinkDecode, BadFiguresAreCorruptionNamingTheKey) {
  struct Bad {
    json link;
    const char* names;
  };
  const std::vector<Bad> cases = {
      {json("many"), "TaskSucceeded.link"},
      {json::array({1, 2}), "TaskSucceeded.link"},
      {json{{"round_trips", "12"}}, "TaskSucceeded.link.round_trips"},
      {json{{"round_trips", -1}}, "TaskSucceeded.link.round_trips"},
      {json{{"link_ms", 1.5}}, "TaskSucceeded.link.link_ms"},
      {json{{"bytes_in", true}}, "TaskSucceeded.link.bytes_in"},
      {json{{"bytes_out", 18446744073709551615ull}}, "TaskSucceeded.link.bytes_out"},
  };
  for (const auto& c : cases) {
    auto d = DecodeTaskLink("TaskSucceeded", json{{"task_id", "r1.t1"}, {"link", c.link}});
    ASSERT_FALSE(d.ok()) << c.link.dump();
    EXPECT_EQ(d.status().code(), Code::kCorruption);
    EXPECT_NE(d.status().message().find(c.names), std::string::npos) << d.status().message();
  }
}

TEST(TaskLinkDecode, SumsFigureByFigure) {
  events::TaskLink sum;
  AddTaskLink(sum, *DecodeTaskLink("TaskSucceeded", json{{"link", Figures(3)}}).value());
  AddTaskLink(sum, *DecodeTaskLink("TaskSucceeded", json{{"link", Figures(4)}}).value());
  EXPECT_EQ(sum.round_trips(), 7);
  EXPECT_EQ(sum.bytes_out(), 8000);
}

// A retried task: each attempt's event carries the figures its answer sent;
// an answer without figures (an older worker) records none.
TEST(TaskLinkEngine, EachAttemptRecordsItsOwnFigures) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  Input fail = ResultInput("r1.t1", 1, false, 2000, /*retryable=*/true);
  fail.link = Figures(11);
  auto first = run.Step(fail);
  ASSERT_EQ(Types(first), (std::vector<std::string>{"TaskFailed", "TaskRetryScheduled"}));
  EXPECT_EQ(first[0].payload["link"], Figures(11));
  run.Timer(first[1].payload["timer_id"].get<std::string>(), 2600);
  Input ok = ResultInput("r1.t1", 2, true, 3000, false, json{{"device_count", 8}, {"free_devices", {0, 1}}});
  ok.link = Figures(7);
  auto second = run.Step(ok);
  ASSERT_FALSE(second.empty());
  ASSERT_EQ(second[0].type, "TaskSucceeded");
  EXPECT_EQ(second[0].payload["attempt"], 2);
  EXPECT_EQ(second[0].payload["link"], Figures(7));
  // Both payloads are what events.proto declares (verify's strict check).
  for (const auto& e : {first[0], second[0]}) {
    const Status st = CheckEventPayload(e.type, e.payload, UnknownKeys::kReject);
    EXPECT_TRUE(st.ok()) << e.type << ": " << st.ToString();
  }
}

TEST(TaskLinkEngine, AnAnswerWithoutFiguresRecordsNone) {
  Driver run;
  run.Submit("probe", ProbeSpec(), 1000);
  auto evs = run.Report("r1.t1", 1, true, 2000, false, json{{"device_count", 8}, {"free_devices", {0, 1}}});
  ASSERT_FALSE(evs.empty());
  EXPECT_FALSE(evs[0].payload.contains("link"));
}

TEST(TaskLinkSchema, TheSchemaRefusesFiguresOfTheWrongType) {
  const json bad = {{"task_id", "r1.t1"}, {"attempt", 1}, {"link", {{"round_trips", "many"}}}};
  EXPECT_FALSE(CheckEventPayload("TaskSucceeded", bad, UnknownKeys::kReject).ok());
  EXPECT_FALSE(HasEventSchema("TaskLink")) << "a part of TaskSucceeded and TaskFailed, not an event";
  const json good = {{"task_id", "r1.t1"}, {"attempt", 1}, {"link", Figures(1)}};
  EXPECT_TRUE(CheckEventPayload("TaskFailed", good, UnknownKeys::kReject).ok());
}

}  // namespace
}  // namespace npuprof::sm::testing
