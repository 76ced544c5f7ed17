// Replay determinism: folding a run's stored events reproduces the state the
// decisions built, and folding the same events twice from scratch gives
// byte-identical projections.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sm_test_util.h"
#include "statemachine/replay_verifier.h"

namespace npuprof::sm::testing {
namespace {

// A probe run through most of the common machinery: retryable failure,
// retry timer, lost worker, recovery, a stale result, a duplicate, success.
Driver BusyProbeRun() {
  Driver run("busy-run");
  run.Submit("probe", ProbeSpec(), 1000);
  auto f = run.Report("busy-run.t1", 1, false, 2000, true);
  run.Timer(f[1].payload["timer_id"], f[1].payload["deadline_ms"].get<int64_t>());
  run.WorkerLost("busy-run.t1", 2, 4000);
  run.Recover(5000);
  run.Report("busy-run.t1", 3, true, 5100);  // stale: recovery moved it to attempt 4
  run.Report("busy-run.t1", 4, true, 6000, false, json{{"device_count", 2}, {"free_devices", {0, 1}}});
  run.Report("busy-run.t1", 4, true, 6001);  // duplicate
  return run;
}

std::string Dump(const KindRegistry& kinds, const RunState& s) {
  const RunKind* k = kinds.Find(s.kind);
  return json{{"summary", k->Summary(s)}, {"manifest", k->Manifest(s)}}.dump();
}

// Everything Apply folds, as one JSON value, so a difference anywhere shows.
json Everything(const RunState& s) {
  json tasks = json::object();
  for (const auto& [id, t] : s.tasks)
    tasks[id] = {{"kind", t.kind},     {"attempt", t.attempt}, {"failures", t.failures},
                 {"status", TaskStatusName(t.status)}, {"payload", t.payload}, {"result", t.result},
                 {"policy", TaskPolicyToJson(t.policy)}};
  json timers = json::object();
  for (const auto& [id, t] : s.timers)
    timers[id] = {{"purpose", t.purpose}, {"deadline_ms", t.deadline_ms}, {"payload", t.payload}, {"armed", t.armed}};
  return {{"run_id", s.run_id},         {"kind", s.kind},
          {"state", s.state},           {"status", RunStatusName(s.status)},
          {"machine", s.machine},       {"tag", s.tag},
          {"error", s.error},           {"spec", s.spec},
          {"data", s.data},             {"tasks", tasks},
          {"timers", timers},           {"last_seq", s.last_seq},
          {"created_ms", s.created_ms}, {"updated_ms", s.updated_ms},
          {"finished_ms", s.finished_ms}, {"terminal", s.terminal},
          {"cancel_requested", s.cancel_requested}, {"recoveries", s.recoveries},
          {"watching", s.watching},     {"next_task_no", s.next_task_no},
          {"next_timer_no", s.next_timer_no}};
}

// verify judges the run index row against the fold: an unknown status name
// always, the rest when the row was written with the last event.
TEST(Replay, TheIndexRowIsJudgedAgainstTheFold) {
  Driver run = BusyProbeRun();
  const RunState folded = Fold(run.kinds(), run.log()).value();
  const RunKind& kind = *run.kinds().Find(folded.kind);
  proto::RunIndexRow row;
  row.set_run_id(folded.run_id);
  row.set_kind(folded.kind);
  row.set_state(folded.state);
  row.set_status("ok");
  row.set_terminal(true);
  row.set_last_seq(run.log().size());
  EXPECT_EQ(IndexRowDivergence(kind, row, folded, run.log().size()), "");

  proto::RunIndexRow bad = row;
  bad.set_status("done");
  EXPECT_NE(IndexRowDivergence(kind, bad, folded, run.log().size()).find("status 'done', which is no run status"),
            std::string::npos);
  bad.set_last_seq(1);
  EXPECT_NE(IndexRowDivergence(kind, bad, folded, run.log().size()), "") << "an unknown name is wrong at any prefix";

  bad = row;
  bad.set_status("failed");
  EXPECT_EQ(IndexRowDivergence(kind, bad, folded, run.log().size()),
            "run index says status 'failed' but the events fold to 'ok'");
  bad.set_last_seq(3);
  EXPECT_EQ(IndexRowDivergence(kind, bad, folded, run.log().size()), "") << "written with an earlier prefix";

  bad = row;
  bad.set_terminal(false);
  EXPECT_NE(IndexRowDivergence(kind, bad, folded, run.log().size()).find("terminal"), std::string::npos);
  bad = row;
  bad.set_kind("serve");
  EXPECT_NE(IndexRowDivergence(kind, bad, folded, run.log().size()).find("kind 'serve'"), std::string::npos);
  bad = row;
  bad.set_state("probing");
  EXPECT_NE(IndexRowDivergence(kind, bad, folded, run.log().size()).find("state 'probing'"), std::string::npos);
}

TEST(Replay, FoldReproducesTheDecidedState) {
  Driver run = BusyProbeRun();
  ASSERT_EQ(run.state().status, RunStatus::kOk);
  const RunState folded = Fold(run.kinds(), run.log()).value();
  EXPECT_EQ(Everything(folded), Everything(run.state()));
  EXPECT_EQ(Dump(run.kinds(), folded), Dump(run.kinds(), run.state()));
}

TEST(Replay, FoldingTwiceFromScratchIsByteIdentical) {
  Driver run = BusyProbeRun();
  const std::string a = Dump(run.kinds(), Fold(run.kinds(), run.log()).value());
  const std::string b = Dump(run.kinds(), Fold(run.kinds(), run.log()).value());
  EXPECT_EQ(a, b);
  // Through a serialisation round trip of every event, too.
  std::vector<proto::Event> copy;
  for (const auto& e : run.log()) {
    proto::Event c;
    ASSERT_TRUE(c.ParseFromString(e.SerializeAsString()));
    copy.push_back(c);
  }
  EXPECT_EQ(Dump(run.kinds(), Fold(run.kinds(), copy).value()), a);
}

TEST(Replay, EveryPrefixFoldsToTheStateAtThatPoint) {
  // Decide from a folded prefix gives the same events as deciding live:
  // after a restart the engine continues exactly where it stopped.
  Driver live("p1");
  live.Submit("probe", ProbeSpec(), 1000);
  auto f = live.Report("p1.t1", 1, false, 2000, true);
  const std::vector<proto::Event> prefix = live.log();
  RunState restored = Fold(live.kinds(), prefix).value();
  Input fire;
  fire.type = Input::Type::kTimerFired;
  fire.now_ms = 2500;
  fire.timer_id = f[1].payload["timer_id"];
  auto from_restored = Decide(live.kinds(), restored, fire);
  auto from_live = Decide(live.kinds(), live.state(), fire);
  ASSERT_TRUE(from_restored.ok());
  ASSERT_TRUE(from_live.ok());
  ASSERT_EQ(from_restored->size(), from_live->size());
  for (size_t i = 0; i < from_live->size(); ++i) {
    EXPECT_EQ((*from_restored)[i].type, (*from_live)[i].type);
    EXPECT_EQ((*from_restored)[i].payload, (*from_live)[i].payload);
    EXPECT_EQ((*from_restored)[i].cause, (*from_live)[i].cause);
  }
}

TEST(Replay, AStoredEventTheFoldCannotReadIsCorruptionNeverAnEmptyPayload) {
  Driver run = BusyProbeRun();
  for (const char* bad : {"not json", "[1,2]", "", R"({"task_id": "busy-run.t1", "attempt": "four"})"}) {
    std::vector<proto::Event> log = run.log();
    // The first task event: a non-object payload, or a key of the wrong type.
    size_t at = 0;
    while (at < log.size() && log[at].type() != ev::kTaskScheduled) ++at;
    ASSERT_LT(at, log.size());
    log[at].set_payload_json(bad);
    const Result<RunState> folded = Fold(run.kinds(), log);
    ASSERT_FALSE(folded.ok()) << bad;
    EXPECT_EQ(folded.status().code(), Code::kCorruption) << bad;
    EXPECT_NE(folded.status().message().find("TaskScheduled"), std::string::npos) << folded.status().message();
    EXPECT_NE(folded.status().message().find("busy-run"), std::string::npos) << folded.status().message();
  }
}

TEST(Replay, DecideIsDeterministic) {
  // Same state, same input: the same events, twice.
  Driver a = BusyProbeRun();
  Driver b = BusyProbeRun();
  ASSERT_EQ(a.log().size(), b.log().size());
  for (size_t i = 0; i < a.log().size(); ++i) {
    EXPECT_EQ(a.log()[i].type(), b.log()[i].type());
    EXPECT_EQ(a.log()[i].payload_json(), b.log()[i].payload_json());
  }
  EXPECT_EQ(Dump(a.kinds(), a.state()), Dump(b.kinds(), b.state()));
}

TEST(Replay, CancelledAndFailedRunsReplayToo) {
  Driver c("c1");
  c.Submit("probe", ProbeSpec(), 1000);
  c.Report("c1.t1", 1, false, 1500, true);
  c.Cancel(1600);
  EXPECT_EQ(Everything(Fold(c.kinds(), c.log()).value()), Everything(c.state()));
  Driver f("f1");
  f.Submit("two-task", json::object(), 1000);
  f.Report("f1.t1", 1, false, 1500, false);
  ASSERT_EQ(f.state().status, RunStatus::kFailed);
  EXPECT_EQ(f.task("f1.t2").status, TaskStatus::kAbandoned);
  EXPECT_EQ(Everything(Fold(f.kinds(), f.log()).value()), Everything(f.state()));
}

std::string HashOf(const proto::Event& e) { return e.hash(); }

// An event type that is no event type replayed as nothing and verified ok
// (show then said completed with the task still pending).
TEST(Replay, AnEventTypeNpuprofDoesNotKnowIsCorruption) {
  Driver run = BusyProbeRun();
  ASSERT_TRUE(VerifyRunEvents(run.kinds(), run.log(), HashOf).ok);
  std::vector<proto::Event> log = run.log();
  size_t at = 0;
  while (at < log.size() && log[at].type() != ev::kTaskSucceeded) ++at;
  ASSERT_LT(at, log.size());
  log[at].set_type("NoSuchEvent");
  const VerifyResult v = VerifyRunEvents(run.kinds(), log, HashOf);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.first_divergence,
            fmt::format("event #{} (NoSuchEvent): corruption: an event type npuprof does not know (neither "
                        "proto/events.proto nor proto/kind_events.proto declares it)",
                        at + 1));
}

// A log whose task never ends (its result left out, the rest renumbered)
// replays without an illegal transition to a finished run with a pending
// task: a state no run ends in.
TEST(Replay, ARunThatFinishesWithATaskStillOpenIsInconsistent) {
  Driver run = BusyProbeRun();
  std::vector<proto::Event> log = run.log();
  size_t at = 0;
  while (at < log.size() && log[at].type() != ev::kTaskSucceeded) ++at;
  ASSERT_LT(at, log.size());
  log.erase(log.begin() + static_cast<long>(at));
  for (size_t i = 0; i < log.size(); ++i) log[i].set_seq(i + 1);
  const VerifyResult v = VerifyRunEvents(run.kinds(), log, HashOf);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.first_divergence.find("(RunFinished): the run finished while its task busy-run.t1 (probe.npu_smi) is "
                                    "still pending"),
            std::string::npos)
      << v.first_divergence;
  // Runs that end with their tasks ended in every way verify: succeeded
  // (above), failed for good, abandoned by a cancel or a sibling's failure.
  Driver c("c1");
  c.Submit("probe", ProbeSpec(), 1000);
  c.Report("c1.t1", 1, false, 1500, true);
  c.Cancel(1600);
  Driver f("f1");
  f.Submit("two-task", json::object(), 1000);
  f.Report("f1.t1", 1, false, 1500, false);
  Driver p("p1");
  p.Submit("probe", ProbeSpec(), 1000);
  p.Report("p1.t1", 1, false, 1500, false);
  for (const Driver* d : {&run, &c, &f, &p}) {
    ASSERT_TRUE(d->state().terminal) << d->state().run_id;
    const VerifyResult ok = VerifyRunEvents(d->kinds(), d->log(), HashOf);
    EXPECT_TRUE(ok.ok) << d->state().run_id << ": " << ok.first_divergence;
  }
}

}  // namespace
}  // namespace npuprof::sm::testing
