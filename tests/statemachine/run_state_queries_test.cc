// The shared RunState queries: task numbers and the latest task of a kind
// (by number, never by the map's order).
#include <gtest/gtest.h>

#include "statemachine/run_state_queries.h"

namespace npuprof::sm {
namespace {

void AddTask(RunState& s, const std::string& id, const std::string& kind, json payload = json::object()) {
  TaskInfo t;
  t.task_id = id;
  t.kind = kind;
  t.payload = std::move(payload);
  s.tasks[id] = t;
}

TEST(RunStateQueries, TaskNumberReadsTheCounterAfterDotT) {
  EXPECT_EQ(TaskNumber("r1.t7"), 7u);
  EXPECT_EQ(TaskNumber("run.with.dots.t12"), 12u);
  EXPECT_EQ(TaskNumber("r1"), 0u);
  EXPECT_EQ(TaskNumber("r1.t"), 0u);
  EXPECT_EQ(TaskNumber("r1.t3x"), 0u);
}

TEST(RunStateQueries, LastTaskIsTheHighestNumberNotTheMapOrder) {
  RunState s;
  AddTask(s, "r1.t9", "service.stop");
  AddTask(s, "r1.t10", "service.stop");  // sorts before t9 in the map
  AddTask(s, "r1.t11", "service.launch");
  ASSERT_NE(LastTask(s, "service.stop"), nullptr);
  EXPECT_EQ(LastTask(s, "service.stop")->task_id, "r1.t10");
  EXPECT_EQ(LastTask(s, "service.launch")->task_id, "r1.t11");
  EXPECT_EQ(LastTask(s, "memory.export"), nullptr);
}

TEST(RunStateQueries, LastTaskWithARoleSkipsTheOthers) {
  RunState s;
  AddTask(s, "r1.t2", "tp.requests", {{"role", "wave"}});
  AddTask(s, "r1.t5", "tp.requests", {{"role", "followup"}});
  AddTask(s, "r1.t12", "tp.requests", {{"role", "wave"}});
  AddTask(s, "r1.t13", "tp.requests", json::array());  // not an object: has no role
  EXPECT_EQ(LastTask(s, "tp.requests", "wave")->task_id, "r1.t12");
  EXPECT_EQ(LastTask(s, "tp.requests", "followup")->task_id, "r1.t5");
  EXPECT_EQ(LastTask(s, "tp.requests")->task_id, "r1.t13");
  EXPECT_EQ(LastTask(s, "tp.requests", "none"), nullptr);
}

}  // namespace
}  // namespace npuprof::sm
