// The probe machine's transition table: every legal move is accepted, every
// other (from, to) pair is rejected — by the table, by a Decision, and by
// Decide when a kind emits a crafted StateChanged.
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "sm_test_util.h"

namespace npuprof::sm::testing {
namespace {

const std::set<std::pair<std::string, std::string>> kProbeLegal = {
    {"queued", "probing"},   {"probing", "completed"}, {"probing", "failed"},
    {"queued", "failed"},    {"queued", "cancelled"},  {"probing", "cancelled"}};

// Every state the table knows plus "new" (before RunSubmitted) and a name it does not know.
std::vector<std::string> AllStates(const TransitionTable& t) {
  std::vector<std::string> s = t.States();
  s.push_back("new");
  s.push_back("no-such-state");
  return s;
}

TEST(ProbeTransitions, TableHasExactlyTheDocumentedMoves) {
  const TransitionTable& t = ProbeMachine().transitions();
  EXPECT_EQ(t.moves(), kProbeLegal);
  EXPECT_EQ(t.States(), (std::vector<std::string>{"cancelled", "completed", "failed", "probing", "queued"}));
  for (const char* s : {"completed", "failed", "cancelled"}) EXPECT_TRUE(t.IsTerminal(s)) << s;
  for (const char* s : {"queued", "probing", "new"}) EXPECT_FALSE(t.IsTerminal(s)) << s;
}

TEST(ProbeTransitions, EveryPairAcceptedOnlyWhenLegal) {
  const TransitionTable& t = ProbeMachine().transitions();
  int legal = 0, illegal = 0;
  for (const auto& from : AllStates(t)) {
    for (const auto& to : AllStates(t)) {
      const bool expected = kProbeLegal.count({from, to}) > 0;
      EXPECT_EQ(t.Allowed(from, to), expected) << from << " -> " << to;
      (expected ? legal : illegal)++;
    }
  }
  EXPECT_EQ(legal, 6);
  EXPECT_EQ(illegal, 7 * 7 - 6);
}

TEST(ProbeTransitions, NoMoveLeavesATerminalState) {
  const TransitionTable& t = ProbeMachine().transitions();
  for (const auto& [from, to] : t.moves()) EXPECT_FALSE(t.IsTerminal(from)) << from << " -> " << to;
}

TEST(ProbeTransitions, DecisionRejectsIllegalStateChangedAndAppliesNothing) {
  ProbeMachine probe;
  for (const auto& from : AllStates(probe.transitions())) {
    for (const auto& to : AllStates(probe.transitions())) {
      RunState s;
      s.run_id = "r1";
      s.kind = "probe";
      s.state = from;
      Decision d(probe, s, 5000, "test");
      d.Emit(ev::kStateChanged, json{{"from", from}, {"to", to}});
      if (kProbeLegal.count({from, to})) {
        EXPECT_FALSE(d.failed()) << from << " -> " << to << ": " << d.status().ToString();
        ASSERT_EQ(d.events().size(), 1u);
        EXPECT_EQ(d.state().state, to);
      } else {
        EXPECT_TRUE(d.failed()) << from << " -> " << to;
        EXPECT_EQ(d.status().code(), Code::kFailedPrecondition);
        EXPECT_NE(d.status().message().find("illegal transition"), std::string::npos) << d.status().message();
        EXPECT_TRUE(d.events().empty());
        EXPECT_EQ(d.state().state, from);
        // A failed decision records nothing more.
        d.Emit(ev::kRunFinished, json{{"status", "ok"}});
        EXPECT_TRUE(d.events().empty());
      }
    }
  }
}

TEST(ProbeTransitions, DecideRefusesACraftedIllegalStateChanged) {
  const KindRegistry& kinds = TestKinds();
  for (const auto& from : AllStates(ProbeMachine().transitions())) {
    for (const auto& to : AllStates(ProbeMachine().transitions())) {
      RunState s;
      s.run_id = "r1";
      s.kind = "crafted";
      s.state = from;
      s.last_seq = 3;
      Input in;
      in.type = Input::Type::kSignal;
      in.now_ms = 7000;
      in.signal = "goto";
      in.result = json{{"to", to}};
      auto r = Decide(kinds, s, in);
      if (kProbeLegal.count({from, to})) {
        ASSERT_TRUE(r.ok()) << from << " -> " << to << ": " << r.status().ToString();
        EXPECT_EQ(Types(*r), (std::vector<std::string>{"SignalReceived", "StateChanged"}));
      } else {
        ASSERT_FALSE(r.ok()) << from << " -> " << to;
        EXPECT_NE(r.status().message().find(from + " -> " + to), std::string::npos) << r.status().message();
      }
    }
  }
}

TEST(ProbeTransitions, MachineCheckTableIsClosedToo) {
  const TransitionTable& t = MachineCheckMachine().transitions();
  for (const auto& [from, to] : t.moves()) EXPECT_FALSE(t.IsTerminal(from));
  EXPECT_TRUE(t.Allowed("queued", "checking"));
  EXPECT_FALSE(t.Allowed("completed", "checking"));
  EXPECT_FALSE(t.Allowed("checking", "queued"));
}

}  // namespace
}  // namespace npuprof::sm::testing
