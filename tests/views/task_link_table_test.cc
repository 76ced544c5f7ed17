// A run's per-attempt link figures (views/task_link_table.h) and the trace's
// task span args: rows per attempt (retries and lost workers each their own
// row), totals over the attempts that recorded figures, "not recorded" for
// events written before the figures were (never zeros), an unreadable
// figure kept as an error without hiding the rest.
#include <gtest/gtest.h>

#include "tests/views/view_fixtures.h"
#include "views/chrome_trace.h"
#include "views/task_link_table.h"

namespace npuprof::testing {
namespace {

using nlohmann::json;

json Ev(const std::string& type, int64_t t, json payload) {
  return {{"type", type}, {"time_ms", t}, {"payload", std::move(payload)}};
}

json Link(int64_t rts, int64_t ms) { return {{"round_trips", rts}, {"link_ms", ms}, {"commands", 1}}; }

json MixedRun() {
  json m = {{"machine", {{"name", "sim1"}, {"host", "127.0.0.1"}}}};
  return json::array({
      Ev("RunSubmitted", 1000, {{"kind", "probe"}, {"machine", "sim1"}}),
      Ev("TaskScheduled", 1001, {{"task_id", "r.t1"}, {"kind", "probe.npu_smi"}, {"attempt", 1}, {"payload", m}}),
      Ev("TaskFailed", 1100, {{"task_id", "r.t1"}, {"attempt", 1}, {"final", false}, {"link", Link(5, 40)}}),
      Ev("TaskRedispatched", 1600, {{"task_id", "r.t1"}, {"attempt", 2}, {"reason", "retry"}}),
      Ev("TaskSucceeded", 1700, {{"task_id", "r.t1"}, {"attempt", 2}, {"link", Link(3, 20)}}),
      Ev("TaskScheduled", 1701, {{"task_id", "r.t2"}, {"kind", "service.stop"}, {"attempt", 1}, {"payload", m}}),
      Ev("TaskRedispatched", 1800, {{"task_id", "r.t2"}, {"attempt", 2}, {"reason", "worker_lost"}}),
      Ev("TaskSucceeded", 1900, {{"task_id", "r.t2"}, {"attempt", 2}}),  // an older worker: no figures
      Ev("TaskScheduled", 1901, {{"task_id", "r.t3"}, {"kind", "probe.npu_smi"}, {"attempt", 1}, {"payload", m}}),
      Ev("TaskSucceeded", 1950, {{"task_id", "r.t3"}, {"attempt", 1}, {"link", {{"round_trips", "x"}}}}),
      Ev("TaskScheduled", 1951, {{"task_id", "r.t4"}, {"kind", "probe.npu_smi"}, {"attempt", 1}, {"payload", m}}),
      Ev("RunFinished", 2000, {{"status", "ok"}}),
  });
}

TEST(TaskLinkTable, OneRowPerAttemptAndTotalsOfWhatWasRecorded) {
  const views::TaskLinkTable t = views::BuildTaskLinkTable(MixedRun());
  ASSERT_EQ(t.attempts.size(), 6u);
  EXPECT_EQ(t.attempts[0].outcome, "failed");
  EXPECT_EQ(t.attempts[0].machine, "sim1");
  EXPECT_EQ(t.attempts[0].link->round_trips(), 5);
  EXPECT_EQ(t.attempts[1].attempt, 2);
  EXPECT_EQ(t.attempts[1].link->round_trips(), 3);
  EXPECT_EQ(t.attempts[2].outcome, "lost (worker_lost)");
  EXPECT_FALSE(t.attempts[2].link.has_value());
  EXPECT_EQ(t.attempts[3].outcome, "succeeded");
  EXPECT_FALSE(t.attempts[3].link.has_value());
  EXPECT_NE(t.attempts[4].link_error.find("TaskSucceeded.link.round_trips"), std::string::npos) << t.attempts[4].link_error;
  EXPECT_EQ(t.attempts[5].outcome, "unanswered");
  EXPECT_EQ(t.total.round_trips(), 8);
  EXPECT_EQ(t.total.link_ms(), 60);
  EXPECT_EQ(t.recorded, 2);
  EXPECT_EQ(t.unrecorded, 2);  // r.t2's answer and r.t3's unreadable one

  const json j = views::TaskLinkTableJson(t);
  ASSERT_EQ(j["tasks"].size(), 6u);
  EXPECT_EQ(j["tasks"][0]["round_trips"], 5);
  EXPECT_EQ(j["tasks"][0]["kind"], "probe.npu_smi");
  EXPECT_EQ(j["tasks"][2]["round_trips"], "no answer");
  EXPECT_EQ(j["tasks"][3]["round_trips"], "not recorded");
  EXPECT_EQ(j["tasks"][4]["round_trips"], "unreadable");
  EXPECT_TRUE(j["tasks"][4].contains("link_error"));
  EXPECT_EQ(j["link_total"]["round_trips"], 8);
  EXPECT_EQ(j["link_total"]["recorded_attempts"], 2);
  const std::string text = views::TaskLinkTableText(t);
  EXPECT_NE(text.find("total: 8 round trips, 60 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("not recorded"), std::string::npos) << text;
}

TEST(TaskLinkTable, AnOldRunSaysNotRecorded) {
  const json events = TestJson("views/memory_profile.events.json");
  const views::TaskLinkTable t = views::BuildTaskLinkTable(events["events"]);
  ASSERT_FALSE(t.attempts.empty());
  EXPECT_EQ(t.recorded, 0);
  const json j = views::TaskLinkTableJson(t);
  EXPECT_EQ(j["link_total"], "not recorded");
  for (const auto& row : j["tasks"]) EXPECT_TRUE(row["round_trips"].is_string()) << row.dump();
  EXPECT_NE(views::TaskLinkTableText(t).find("round trips: not recorded"), std::string::npos);
}

TEST(TaskLinkTable, TheTraceCarriesEachAttemptsFigures) {
  auto trace = views::BuildChromeTrace(MixedRun(), {});
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  std::vector<json> spans;
  for (const auto& e : (*trace)["traceEvents"])
    if (e["ph"] == "X" && e["pid"] != 1) spans.push_back(e);
  bool five = false, three = false, not_recorded = false, bad = false;
  for (const auto& s : spans) {
    const json& a = s["args"];
    if (a.value("task_id", "") == "r.t1" && a.contains("round_trips") && a["round_trips"] == 5) five = a["link_ms"] == 40;
    if (a.value("task_id", "") == "r.t1" && a.contains("round_trips") && a["round_trips"] == 3) three = a["link"]["commands"] == 1;
    if (a.value("task_id", "") == "r.t2" && a.contains("round_trips")) not_recorded = a["round_trips"] == "not recorded";
    if (a.value("task_id", "") == "r.t3") bad = a.contains("link_error");
  }
  EXPECT_TRUE(five && three && not_recorded && bad) << (*trace)["traceEvents"].dump();
}

}  // namespace
}  // namespace npuprof::testing
