// The live progress line of --wait / watch (cli/progress_line.h).
#include <gtest/gtest.h>

#include "cli/progress_line.h"

namespace npuprof::cli {
namespace {

using json = nlohmann::json;

json Ev(const std::string& type, int64_t t, json payload = json::object()) {
  return {{"type", type}, {"time_ms", t}, {"payload", std::move(payload)}};
}

TEST(ProgressLine, StateElapsedStepAndWhatAQueuedRunWaitsFor) {
  RunProgress p;
  p.run_id = "r1";
  ApplyProgressEvent(p, Ev("RunSubmitted", 1000));
  ApplyWaitingFor(p, {{"reason", "devices 0,1 held by run r0"}, {"queued_ahead", 1}});
  EXPECT_EQ(ProgressLine(p, 66000, 200), "r1 queued 1:05 · waiting (1 ahead): devices 0,1 held by run r0");
  ApplyProgressEvent(p, Ev("StateChanged", 70000, {{"from", "queued"}, {"to", "launching"}}));
  ApplyProgressEvent(p, Ev("TaskScheduled", 70000, {{"kind", "service.launch"}, {"attempt", 1}}));
  EXPECT_EQ(ProgressLine(p, 71000, 200), "r1 launching 1:10 · service.launch");
  ApplyProgressEvent(p, Ev("TaskRedispatched", 72000, {{"attempt", 2}, {"reason", "worker_lost"}}));
  EXPECT_EQ(ProgressLine(p, 72000, 200), "r1 launching 1:11 · service.launch (attempt 2)");
  ApplyProgressEvent(p, Ev("RunFinished", 90000, {{"status", "ok"}}));
  EXPECT_EQ(ProgressLine(p, 90000, 200), "r1 ok 1:29");
}

TEST(ProgressLine, NarrowTerminalsAndOddInputAreSafe) {
  RunProgress p;
  p.run_id = "r2";
  ApplyProgressEvent(p, json::array());
  ApplyProgressEvent(p, Ev("TaskScheduled", 5, {{"kind", "a.very.long.task.kind"}, {"attempt", "x"}}));
  ApplyWaitingFor(p, "not an object");
  const std::string line = ProgressLine(p, 1, 12);
  EXPECT_LE(line.size(), 12u + 3u) << line;
  EXPECT_NE(line.find("…"), std::string::npos) << line;
  EXPECT_EQ(ProgressLine(p, 0, 200).find("-"), std::string::npos) << "no negative elapsed time";
}

// The line is drawn with ESC [ K on a terminal: a state, step or waiting
// reason from a target or an imported run never brings its own.
TEST(ProgressLine, ControlCharactersFromEventsAreWrittenOut) {
  RunProgress p;
  p.run_id = "r3";
  ApplyProgressEvent(p, Ev("RunSubmitted", 1000));
  ApplyWaitingFor(p, {{"reason", "npu-smi: \x1b]0;TITLE\x07\x1b[2J\r\nx"}});
  EXPECT_EQ(ProgressLine(p, 1000, 200), "r3 queued 0:00 · waiting: npu-smi: \\x1b]0;TITLE\\x07\\x1b[2J\\r\\nx");
  ApplyProgressEvent(p, Ev("StateChanged", 2000, {{"from", "queued"}, {"to", "x\xC2\x9B" "2J"}}));
  EXPECT_EQ(ProgressLine(p, 2000, 200), "r3 x\\u009b2J 0:01");
}

}  // namespace
}  // namespace npuprof::cli
