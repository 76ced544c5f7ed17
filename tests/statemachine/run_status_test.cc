// The run and task statuses (statemachine/run_state.h): each name parses back
// to its status, no other string parses, and a stored RunFinished whose status
// is not a way to end is Corruption.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sm_test_util.h"
#include "statemachine/decision.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"

namespace npuprof::sm::testing {
namespace {

template <typename T>
std::string Streamed(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

TEST(RunStatus, EveryNameParsesBackAndNoOtherStringDoes) {
  const std::vector<std::pair<RunStatus, std::string>> all = {{RunStatus::kRunning, "running"},
                                                              {RunStatus::kOk, "ok"},
                                                              {RunStatus::kFailed, "failed"},
                                                              {RunStatus::kCancelled, "cancelled"}};
  for (const auto& [status, name] : all) {
    EXPECT_EQ(RunStatusName(status), name);
    EXPECT_EQ(Streamed(status), name);
    const std::optional<RunStatus> parsed = ParseRunStatus(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, status) << name;
  }
  for (const char* other : {"", "OK", "Ok", "ok ", "completed", "succeeded", "cancelling", "unknown", "missing"})
    EXPECT_FALSE(ParseRunStatus(other).has_value()) << "'" << other << "'";
}

TEST(TaskStatus, EveryNameParsesBackAndNoOtherStringDoes) {
  const std::vector<std::pair<TaskStatus, std::string>> all = {{TaskStatus::kPending, "pending"},
                                                               {TaskStatus::kRetryWait, "retry_wait"},
                                                               {TaskStatus::kSucceeded, "succeeded"},
                                                               {TaskStatus::kFailed, "failed"},
                                                               {TaskStatus::kAbandoned, "abandoned"}};
  for (const auto& [status, name] : all) {
    EXPECT_EQ(TaskStatusName(status), name);
    EXPECT_EQ(Streamed(status), name);
    const std::optional<TaskStatus> parsed = ParseTaskStatus(name);
    ASSERT_TRUE(parsed.has_value()) << name;
    EXPECT_EQ(*parsed, status) << name;
  }
  for (const char* other : {"", "PENDING", "retry-wait", "retrywait", "ok", "running", "cancelled", "unknown"})
    EXPECT_FALSE(ParseTaskStatus(other).has_value()) << "'" << other << "'";
  EXPECT_TRUE(TaskInfo{}.in_flight());
  EXPECT_EQ(TaskInfo{}.status, TaskStatus::kPending);
}

// A probe run that ends ok: the RunFinished event carries the status's name.
Driver FinishedProbeRun() {
  Driver run("st1");
  run.Submit("probe", ProbeSpec(), 1000);
  run.Report("st1.t1", 1, true, 2000, false, json{{"device_count", 2}, {"free_devices", {0, 1}}});
  return run;
}

TEST(RunStatus, RunFinishedCarriesTheNameAndFoldsToTheStatus) {
  Driver run = FinishedProbeRun();
  ASSERT_EQ(run.state().status, RunStatus::kOk);
  ASSERT_FALSE(run.log().empty());
  const proto::Event& last = run.log().back();
  ASSERT_EQ(last.type(), ev::kRunFinished);
  EXPECT_EQ(json::parse(last.payload_json()).value("status", ""), "ok");
  EXPECT_EQ(run.Summary().value("status", ""), "ok");
  for (const RunStatus status : {RunStatus::kOk, RunStatus::kFailed, RunStatus::kCancelled}) {
    std::vector<proto::Event> log = run.log();
    json p = json::parse(log.back().payload_json());
    p["status"] = RunStatusName(status);
    log.back().set_payload_json(p.dump());
    const Result<RunState> folded = Fold(run.kinds(), log);
    ASSERT_TRUE(folded.ok()) << folded.status().ToString();
    EXPECT_EQ(folded->status, status);
    EXPECT_TRUE(folded->terminal);
  }
}

TEST(RunStatus, AStoredRunFinishedWithAnUnknownStatusIsCorruption) {
  Driver run = FinishedProbeRun();
  for (const char* bad : {"running", "done", "OK", ""}) {
    std::vector<proto::Event> log = run.log();
    json p = json::parse(log.back().payload_json());
    p["status"] = bad;
    log.back().set_payload_json(p.dump());
    const Result<RunState> folded = Fold(run.kinds(), log);
    ASSERT_FALSE(folded.ok()) << "'" << bad << "'";
    EXPECT_EQ(folded.status().code(), Code::kCorruption) << bad;
    EXPECT_NE(folded.status().message().find("RunFinished"), std::string::npos) << folded.status().message();
    EXPECT_NE(folded.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << folded.status().message();
  }
}

TEST(RunStatus, FinishingWithRunningFailsTheDecisionAndEmitsNothing) {
  const RunKind* kind = TestKinds().Find("probe");
  ASSERT_NE(kind, nullptr);
  RunState s;
  s.run_id = "st2";
  Decision d(*kind, s, 1000, "test");
  d.Finish(RunStatus::kRunning);
  EXPECT_TRUE(d.failed());
  EXPECT_EQ(d.status().code(), Code::kInternal);
  EXPECT_TRUE(d.events().empty());
  EXPECT_EQ(d.state().status, RunStatus::kRunning);
  EXPECT_FALSE(d.state().terminal);
}

}  // namespace
}  // namespace npuprof::sm::testing
