// `import` judges a run's submission as `submit` does (statemachine/import_checks.h):
// a run npuprof recorded passes, whatever its kind; a forged spec, a forged
// RunSubmitted field or an unknown kind is refused naming the field.
#include "statemachine/import_checks.h"

#include <gtest/gtest.h>

#include "recorded_runs.h"
#include "sm_test_util.h"
#include "statemachine/engine.h"
#include "statemachine/replay_verifier.h"

namespace npuprof::sm::testing {
namespace {

using testing_support::EventsAsLog;
using testing_support::RecordedRunEvents;

proto::Event ProbeSubmitted() {
  Driver run("p1", DefaultKinds());
  run.Submit("probe", ProbeSpec(), 1000);
  return run.log().front();
}

proto::Event Edited(proto::Event e, const std::function<void(json&)>& change) {
  json p = json::parse(e.payload_json());
  change(p);
  e.set_payload_json(p.dump());
  return e;
}

TEST(ImportChecks, RunsNpuprofRecordedPassWhateverTheirKind) {
  const Status probe = JudgeImportedSubmission(DefaultKinds(), ProbeSubmitted());
  EXPECT_TRUE(probe.ok()) << probe.message();
  for (const char* name : testing_support::kRecordedRuns) {
    const std::vector<proto::Event> log = EventsAsLog(name, RecordedRunEvents(name));
    ASSERT_FALSE(log.empty()) << name;
    const Status st = JudgeImportedSubmission(DefaultKinds(), log.front());
    EXPECT_TRUE(st.ok()) << name << ": " << st.message();
    const VerifyResult v = VerifyRunEvents(DefaultKinds(), log, testing_support::SeqHash);
    EXPECT_TRUE(v.ok) << name << ": " << v.first_divergence;
  }
}

TEST(ImportChecks, ASpecSubmitWouldRefuseIsRefusedNamingTheField) {
  // A 100 MB tag imported, and every `runs` then moved it; 1 MB shows it here.
  const std::string big(1 << 20, 't');
  const Status tag = JudgeImportedSubmission(DefaultKinds(), Edited(ProbeSubmitted(), [&](json& p) {
                                               p["spec"]["tag"] = big;
                                               p["tag"] = big;
                                             }));
  ASSERT_FALSE(tag.ok());
  EXPECT_EQ(tag.code(), Code::kInvalidArgument);
  EXPECT_NE(tag.message().find("its probe spec is not one `submit` accepts: tag '"), std::string::npos)
      << tag.message().substr(0, 300);
  EXPECT_LT(tag.message().size(), 600u) << "the refusal does not carry the megabyte";

  const Status range = JudgeImportedSubmission(
      DefaultKinds(), Edited(ProbeSubmitted(), [](json& p) { p["spec"]["busy_threshold_mb"] = -1; }));
  EXPECT_NE(range.message().find("busy_threshold_mb = -1 is out of range"), std::string::npos) << range.message();

  const Status machine = JudgeImportedSubmission(
      DefaultKinds(), Edited(ProbeSubmitted(), [](json& p) { p["spec"]["machine"] = "a b"; p["machine"] = "a b"; }));
  EXPECT_NE(machine.message().find("machine 'a b' is not allowed"), std::string::npos) << machine.message();

  const Status undeclared = JudgeImportedSubmission(
      DefaultKinds(), Edited(ProbeSubmitted(), [](json& p) { p["spec"]["smuggled"] = 1; }));
  EXPECT_NE(undeclared.message().find("smuggled"), std::string::npos) << undeclared.message();
}

TEST(ImportChecks, TheRunSubmittedFieldsAreTheSpecsAndTheKindIsKnown) {
  // The run index row (what `runs` lists) is written from these.
  const Status tag = JudgeImportedSubmission(DefaultKinds(),
                                             Edited(ProbeSubmitted(), [](json& p) { p["tag"] = std::string(5000, 'x'); }));
  EXPECT_EQ(tag.message(), "RunSubmitted.tag is not the spec's tag (the engine writes the same value in both)");
  const Status machine =
      JudgeImportedSubmission(DefaultKinds(), Edited(ProbeSubmitted(), [](json& p) { p["machine"] = "other"; }));
  EXPECT_NE(machine.message().find("RunSubmitted.machine is not the spec's machine"), std::string::npos);
  const Status kind =
      JudgeImportedSubmission(DefaultKinds(), Edited(ProbeSubmitted(), [](json& p) { p["kind"] = "nosuch"; }));
  EXPECT_EQ(kind.message(), "unknown run kind 'nosuch'");
  proto::Event other = ProbeSubmitted();
  other.set_type("StateChanged");
  EXPECT_FALSE(JudgeImportedSubmission(DefaultKinds(), other).ok());
}

}  // namespace
}  // namespace npuprof::sm::testing
