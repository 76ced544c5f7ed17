// The memory-profile kind's transition table, derived from its steps
// (statemachine/memory_profile_steps.h): exactly the moves the planner's walk
// makes plus the failure and cancel paths; an illegal move is rejected by a
// Decision and by Decide (the whole input); a log stored under the states'
// old names still folds, verifies and projects as before.
#include <set>
#include <string_view>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "npuprof.pb.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/event_schema.h"
#include "statemachine/memory_profile_events.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/memory_profile_steps.h"
#include "statemachine/replay_verifier.h"
#include "tests/statemachine/recorded_runs.h"

namespace npuprof::sm {
namespace {

using Moves = std::set<std::pair<std::string, std::string>>;

// The walk's moves between working states and to completed, written out.
const Moves kWalk = {
    // standalone: one step after the other, none passed over
    {"queued", "preflight"}, {"preflight", "baseline"}, {"baseline", "service"}, {"service", "ready"},
    {"ready", "after_ready"}, {"after_ready", "vllm_log"}, {"vllm_log", "inference"},
    {"inference", "after_infer"}, {"after_infer", "stopped"}, {"stopped", "weights"},
    {"weights", "flushed"}, {"flushed", "export"}, {"export", "msprof"}, {"msprof", "completed"},
    // standalone: the headers, read beside the stop, may be done when it ends
    {"stopped", "flushed"},
    // standalone: the baseline beside the preflight, the logs beside the after-ready snapshot
    {"preflight", "service"}, {"after_ready", "profile_start"}, {"after_ready", "inference"},
    // standalone cleanup: logs after a failed launch or readiness, stop on failure or cancel
    {"service", "vllm_log"}, {"service", "stopped"}, {"ready", "vllm_log"}, {"ready", "stopped"},
    {"after_ready", "stopped"}, {"vllm_log", "stopped"}, {"inference", "stopped"},
    // attach: live steps passed over once the serve run ended (or readiness failed)
    {"queued", "ready"}, {"queued", "vllm_log"}, {"vllm_log", "weights"}, {"inference", "weights"},
    {"after_infer", "weights"},
    // attach: the wait for the serve run's end, then the msprof steps when wrapped
    {"weights", "awaiting_service_stop"}, {"weights", "flushed"}, {"weights", "completed"},
    {"awaiting_service_stop", "flushed"}, {"awaiting_service_stop", "completed"},
    // standalone --operator-memory: the profile window around the inference, the digest last
    {"vllm_log", "profile_start"}, {"profile_start", "inference"}, {"inference", "profile_stop"},
    {"profile_stop", "after_infer"}, {"msprof", "operator_memory"}, {"operator_memory", "completed"},
    {"profile_start", "stopped"}, {"profile_stop", "stopped"},
    // install_wrapper
    {"preflight", "completed"},
};

const std::vector<std::string> kWorking = {"queued",   "preflight", "baseline",    "service",
                                           "ready",    "after_ready", "vllm_log",  "inference",
                                           "after_infer", "stopped", "weights",    "flushed",
                                           "export",   "msprof",    "awaiting_service_stop",
                                           "profile_start", "profile_stop", "operator_memory"};

const TransitionTable& Table() { return DefaultKinds().Find("memory-profile")->transitions(); }

TEST(MemorySteps, TableHasExactlyTheWalkAndTheFailureAndCancelPaths) {
  Moves expected = kWalk;
  for (const auto& s : kWorking) {
    expected.emplace(s, "failed");
    expected.emplace(s, "cancelled");
  }
  EXPECT_EQ(Table().moves(), expected);
  for (const auto& [from, to] : Table().moves()) EXPECT_FALSE(Table().IsTerminal(from)) << from << " -> " << to;
  for (const char* s : {"completed", "failed", "cancelled"}) EXPECT_TRUE(Table().IsTerminal(s));
}

TEST(MemorySteps, SkipsTheStepsNeverMakeAreIllegal) {
  const Moves illegal = {{"baseline", "export"},  {"preflight", "ready"}, {"queued", "baseline"},
                         {"queued", "after_ready"}, {"stopped", "service"}, {"ready", "inference"},
                         {"after_ready", "after_infer"}, {"stopped", "completed"}, {"weights", "export"},
                         {"stopped", "export"}, {"preflight", "after_ready"},
                         {"flushed", "completed"}, {"export", "completed"}, {"flushed", "msprof"},
                         {"baseline", "completed"}, {"completed", "export"}, {"failed", "queued"},
                         {"awaiting_service_stop", "weights"}, {"weights", "stopped"}};
  for (const auto& [from, to] : illegal) EXPECT_FALSE(Table().Allowed(from, to)) << from << " -> " << to;
  // The old names are not states any more: only the fold maps them.
  EXPECT_FALSE(Table().Allowed("launching", "waiting_ready"));
  EXPECT_EQ(Table().Current("waiting_ready"), "ready");
  EXPECT_EQ(Table().Current("collecting_csvs"), "msprof");
  EXPECT_EQ(Table().Current("awaiting_service_stop"), "awaiting_service_stop");
}

TEST(MemorySteps, EveryStepOfEveryModeIsAState) {
  std::set<std::string> states(kWorking.begin(), kWorking.end());
  for (const char* mode : {"standalone", "attach", "install_wrapper"})
    for (const MemStep& st : MemoryStepsOf(mode)) EXPECT_TRUE(states.count(std::string(st.name))) << st.name;
  EXPECT_EQ(MemoryStepsOf("install_wrapper").size(), 1u);
}

TEST(MemorySteps, DecisionRejectsAnIllegalMoveAndRecordsNothing) {
  const RunKind& kind = *DefaultKinds().Find("memory-profile");
  RunState s;
  s.run_id = "m1";
  s.kind = "memory-profile";
  s.state = "baseline";
  Decision d(kind, s, 5000, "test");
  d.Transition("export");
  ASSERT_TRUE(d.failed());
  EXPECT_EQ(d.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("illegal transition baseline -> export for run kind memory-profile"),
            std::string::npos)
      << d.status().message();
  EXPECT_TRUE(d.events().empty());
  EXPECT_EQ(d.state().state, "baseline");
}

// The real machine plus a "goto" signal that records evidence and then moves
// to payload.to: pushes any move through Decide.
class GotoMemoryKind : public MemoryProfileMachine {
 public:
  bool AcceptsSignal(std::string_view n) const override { return n == "goto"; }
  void OnSignal(Decision& d, const std::string&, const json& p) const override {
    d.Emit(kMemRecorded, json{{"field", "note"}, {"value", "before the move"}});
    d.Transition(p.value("to", ""));
  }
};

TEST(MemorySteps, DecideRejectsTheWholeInputOfAnIllegalMove) {
  KindRegistry kinds;
  kinds.Register(std::make_unique<GotoMemoryKind>());
  RunState s;
  s.run_id = "m1";
  s.kind = "memory-profile";
  s.state = "baseline";
  s.last_seq = 4;
  Input in;
  in.type = Input::Type::kSignal;
  in.now_ms = 7000;
  in.signal = "goto";
  for (const char* to : {"export", "after_ready", "completed", "launching"}) {
    in.result = json{{"to", to}};
    auto r = Decide(kinds, s, in);
    ASSERT_FALSE(r.ok()) << "baseline -> " << to;
    EXPECT_NE(r.status().message().find(std::string("baseline -> ") + to), std::string::npos) << r.status().message();
  }
  in.result = json{{"to", "service"}};
  auto ok = Decide(kinds, s, in);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 3u);
  EXPECT_EQ((*ok)[2].type, ev::kStateChanged);
}

// The stored fixture run (a standalone run, stored before the rename) as
// proto events, re-chained with a test hash; `rename` rewrites the states to
// today's names.
std::vector<proto::Event> FixtureLog(bool rename) {
  json events = testing_support::RecordedRunEvents("memory_profile");
  if (rename)
    for (auto& e : events)
      if (e["type"] == ev::kStateChanged)
        for (const char* k : {"from", "to"})
          if (e["payload"].contains(k)) e["payload"][k] = Table().Current(e["payload"][k].get<std::string>());
  return testing_support::EventsAsLog("mp-fixture", events);
}


TEST(MemorySteps, OldNamedLogFoldsVerifiesAndProjectsAsBefore) {
  const auto old_log = FixtureLog(false);
  ASSERT_GT(old_log.size(), 20u);
  int old_named = 0;
  for (const auto& e : old_log)
    if (e.type() == ev::kStateChanged && e.payload_json().find("\"waiting_ready\"") != std::string::npos) old_named++;
  ASSERT_EQ(old_named, 2) << "the fixture is expected to carry the old state names";

  const VerifyResult v = VerifyRunEvents(DefaultKinds(), old_log, testing_support::SeqHash);
  ASSERT_TRUE(v.ok) << v.first_divergence;
  EXPECT_EQ(v.events, old_log.size());
  EXPECT_EQ(v.state.state, "completed");

  // Every prefix folds to today's name of the state it reached.
  for (size_t n = 1; n <= old_log.size(); ++n) {
    const proto::Event& last = old_log[n - 1];
    if (last.type() != ev::kStateChanged) continue;
    const std::vector<proto::Event> prefix(old_log.begin(), old_log.begin() + static_cast<long>(n));
    const std::string to = json::parse(last.payload_json())["to"].get<std::string>();
    EXPECT_EQ(Fold(DefaultKinds(), prefix).value().state, Table().Current(to)) << "after #" << n;
  }

  // The same run under today's names folds to the same projections, byte for byte.
  const auto new_log = FixtureLog(true);
  ASSERT_TRUE(VerifyRunEvents(DefaultKinds(), new_log, testing_support::SeqHash).ok);
  const RunKind& kind = *DefaultKinds().Find("memory-profile");
  const RunState a = Fold(DefaultKinds(), old_log).value(), b = Fold(DefaultKinds(), new_log).value();
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(kind.Summary(a).dump(), kind.Summary(b).dump());
  EXPECT_EQ(kind.Manifest(a).dump(), kind.Manifest(b).dump());
}

TEST(MemorySteps, AnOldLogWithAMoveTheStepsNeverMakeFailsVerify) {
  auto log = FixtureLog(false);
  // Make the first old-named move skip a step: baseline -> waiting_ready.
  for (auto& e : log) {
    if (e.type() != ev::kStateChanged) continue;
    json p = json::parse(e.payload_json());
    if (p["to"] == "launching") {
      p["to"] = "waiting_ready";
      e.set_payload_json(p.dump());
      break;
    }
  }
  const VerifyResult v = VerifyRunEvents(DefaultKinds(), log, testing_support::SeqHash);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.first_divergence.find("illegal transition baseline -> ready"), std::string::npos) << v.first_divergence;
}

TEST(MemoryEvents, OneEventTypePerEvidenceFieldNoneAShared) {
  std::set<std::string_view> fields, types;
  for (const auto& e : MemoryEvidenceEvents()) {
    EXPECT_TRUE(fields.insert(e.field).second) << e.field;
    EXPECT_TRUE(types.insert(e.type).second) << e.type;
    EXPECT_FALSE(HasEventSchema(e.type)) << e.type << " is a shared event's name";
    EXPECT_NE(e.type, kMemRecorded);
    EXPECT_EQ(MemoryFieldOf(MemoryEventTypeFor(e.field)), e.field);
  }
  EXPECT_EQ(MemoryEventTypeFor("no_such_field"), "");
  EXPECT_EQ(MemoryFieldOf(kMemRecorded), "") << "the generic form names its field in its payload";
}

TEST(MemoryEvents, ALogOfGenericRecordsFoldsAsTheSameLogOfDomainEvents) {
  // The fixture was written before the domain events: every record in it is
  // MemoryEvidenceRecorded {"field", "value"}.
  const auto old_log = FixtureLog(true);
  std::vector<proto::Event> new_log;
  int converted = 0;
  for (proto::Event e : old_log) {
    if (e.type() == kMemRecorded) {
      const json p = json::parse(e.payload_json());
      const std::string_view type = MemoryEventTypeFor(p["field"].get<std::string>());
      if (!type.empty() && p["value"].is_object()) {
        e.set_type(std::string(type));
        e.set_payload_json(p["value"].dump());
        ++converted;
      }
    }
    new_log.push_back(e);
  }
  ASSERT_GT(converted, 10);
  const VerifyResult v = VerifyRunEvents(DefaultKinds(), new_log, testing_support::SeqHash);
  ASSERT_TRUE(v.ok) << v.first_divergence;
  const RunKind& kind = *DefaultKinds().Find("memory-profile");
  const RunState a = Fold(DefaultKinds(), old_log).value(), b = Fold(DefaultKinds(), new_log).value();
  EXPECT_EQ(a.data.dump(), b.data.dump());
  EXPECT_EQ(kind.Summary(a).dump(), kind.Summary(b).dump());
  EXPECT_EQ(kind.Manifest(a).dump(), kind.Manifest(b).dump());
}

}  // namespace
}  // namespace npuprof::sm
