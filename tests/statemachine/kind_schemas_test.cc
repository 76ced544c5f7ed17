// A run kind's spec and data are declared in proto/run_specs.proto and
// proto/kind_data.proto (statemachine/kind_schemas.h): a submission whose
// spec holds a key its message does not declare is refused naming the key
// (nothing runs); `verify` reports a stored spec that does not fit, or a fold
// to an undeclared data key, as corruption naming the event; the recorded
// runs fit both at every step.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "kind_data.pb.h"
#include "message_fill.h"
#include "recorded_runs.h"
#include "run_specs.pb.h"
#include "sm_test_util.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/replay_verifier.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm::testing {
namespace {

namespace pb = google::protobuf;
using npuprof::testing_support::EventsAsLog;
using npuprof::testing_support::FilledJson;
using npuprof::testing_support::kRecordedRuns;
using npuprof::testing_support::RecordedRunEvents;
using npuprof::testing_support::SeqHash;

const json kMachine = {{"name", "sim1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}};

TEST(RunSpec, EveryBuiltInKindHasASpecMessageAndNoMessageIsForAnUnknownKind) {
  const std::vector<std::string> declared = RunSpecKinds();
  const std::set<std::string> with_message(declared.begin(), declared.end());
  EXPECT_EQ(declared.size(), with_message.size()) << "a kind has two messages";
  const std::vector<std::string> names = DefaultKinds().Names();
  for (const std::string& k : names) EXPECT_TRUE(HasRunSpecSchema(k)) << k << " has no message in run_specs.proto";
  for (const std::string& k : with_message)
    EXPECT_NE(std::find(names.begin(), names.end(), k), names.end()) << k << " is no run kind";
  EXPECT_TRUE(CheckRunSpec("test-kind", json{{"anything", 1}}).ok()) << "a kind without a message is not judged";
}

// True when some message of `file` has a field of type `part` (a shared part
// such as DeploymentNode, not a kind's own message).
bool IsPartOfAnother(const pb::FileDescriptor& file, const pb::Descriptor& part) {
  for (int i = 0; i < file.message_type_count(); ++i) {
    const pb::Descriptor* m = file.message_type(i);
    for (int f = 0; f < m->field_count(); ++f)
      if (m->field(f)->message_type() == &part) return true;
  }
  return false;
}

TEST(RunSpec, EveryMessageFilledIsASpecItsKindAccepts) {
  const pb::FileDescriptor* file = run_specs::ProbeSpec::descriptor()->file();
  for (int i = 0; i < file->message_type_count(); ++i) {
    const pb::Descriptor* d = file->message_type(i);
    const std::string kind = SpecKindOf(*d);
    if (kind.empty() && IsPartOfAnother(*file, *d)) continue;
    ASSERT_FALSE(kind.empty()) << d->name() << " has no (spec_of)";
    const Status s = CheckRunSpec(kind, json::parse(FilledJson(*d)));
    EXPECT_TRUE(s.ok()) << kind << ": " << s.message();
  }
}

TEST(RunSpec, AMisspelledSpecKeyRefusesTheSubmissionNamingItAndNothingRuns) {
  RunState none;
  none.run_id = "p1";
  const auto refused = Decide(DefaultKinds(), none,
                              SubmitInput("probe", json{{"machine", "sim1"}, {"machine_record", kMachine},
                                                        {"busy_treshold_mb", 100}},
                                          1000));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("busy_treshold_mb"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("ProbeSpec"), std::string::npos) << refused.status().message();
  // Spelled right, the same submission starts.
  const auto ok = Decide(DefaultKinds(), none,
                         SubmitInput("probe", json{{"machine", "sim1"}, {"machine_record", kMachine},
                                                   {"busy_threshold_mb", 100}},
                                     1000));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_FALSE(ok->empty());
}

TEST(RunSpec, AKeyInCamelCaseIsRefusedWithTheNameToWrite) {
  // protobuf's JSON parser would take busyThresholdMb for busy_threshold_mb;
  // the spec would then keep its filled-in default and the run use it.
  const Status s = CheckRunSpec("probe", json{{"machine", "sim1"}, {"busyThresholdMb", 5}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("busyThresholdMb: write the field's name, busy_threshold_mb"), std::string::npos)
      << s.message();
  // Nested too: a key of the machine record.
  const Status nested = CheckRunSpec("probe", json{{"machine", "sim1"}, {"machine_record", {{"knownHostsFile", "/k"}}}});
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.message().find("machine_record.knownHostsFile"), std::string::npos) << nested.message();
  EXPECT_EQ(CheckKindData("torch-profile", json{{"cleanupReason", "x"}}).code(), Code::kCorruption);
}

TEST(RunSpec, TheRecordedRunsSpecsFitAndAStoredSpecWithAnUnknownKeyIsCorruption) {
  for (const char* name : kRecordedRuns) {
    json events = RecordedRunEvents(name);
    ASSERT_TRUE(events.is_array() && !events.empty()) << name;
    const VerifyResult good = VerifyRunEvents(DefaultKinds(), EventsAsLog(name, events), SeqHash);
    ASSERT_TRUE(good.ok) << name << ": " << good.first_divergence;
    events[0]["payload"]["spec"]["helth_timeout_s"] = 30;
    const VerifyResult bad = VerifyRunEvents(DefaultKinds(), EventsAsLog(name, events), SeqHash);
    ASSERT_FALSE(bad.ok) << name;
    EXPECT_NE(bad.first_divergence.find("event #1"), std::string::npos) << bad.first_divergence;
    EXPECT_NE(bad.first_divergence.find("corruption"), std::string::npos) << bad.first_divergence;
    EXPECT_NE(bad.first_divergence.find("helth_timeout_s"), std::string::npos) << bad.first_divergence;
  }
}

TEST(KindData, EveryBuiltInKindHasADataMessageAndNoMessageIsForAnUnknownKind) {
  const std::vector<std::string> declared = KindDataKinds();
  const std::set<std::string> with_message(declared.begin(), declared.end());
  EXPECT_EQ(declared.size(), with_message.size()) << "a kind has two messages";
  const std::vector<std::string> names = DefaultKinds().Names();
  const std::set<std::string> kinds(names.begin(), names.end());
  for (const std::string& k : kinds) EXPECT_TRUE(HasKindDataSchema(k)) << k << " has no message in kind_data.proto";
  for (const std::string& k : with_message) EXPECT_TRUE(kinds.count(k)) << k << " is no run kind";
  EXPECT_FALSE(HasKindDataSchema("test-kind"));
  EXPECT_TRUE(CheckKindData("test-kind", json{{"anything", 1}}).ok()) << "a kind without a message is not judged";
}

TEST(KindData, EveryMessageFilledIsDataItsKindAccepts) {
  const pb::FileDescriptor* file = kind_data::ProbeData::descriptor()->file();
  for (int i = 0; i < file->message_type_count(); ++i) {
    const pb::Descriptor* d = file->message_type(i);
    const std::string kind = DataKindOf(*d);
    if (kind.empty() && IsPartOfAnother(*file, *d)) continue;
    ASSERT_FALSE(kind.empty()) << d->name() << " has no (data_of)";
    const json data = json::parse(FilledJson(*d));
    const Status s = CheckKindData(kind, data);
    EXPECT_TRUE(s.ok()) << kind << ": " << s.message();
  }
}

TEST(KindData, TheRecordedRunsFitTheirKindsMessageAfterEveryEvent) {
  for (const char* name : kRecordedRuns) {
    const auto log = EventsAsLog(name, RecordedRunEvents(name));
    ASSERT_GT(log.size(), 10u) << name;
    const VerifyResult v = VerifyRunEvents(DefaultKinds(), log, SeqHash);
    ASSERT_TRUE(v.ok) << name << ": " << v.first_divergence;
    EXPECT_FALSE(v.state.data.empty()) << name;
    RunState s;
    for (const auto& e : log) {
      ASSERT_TRUE(ApplyStored(DefaultKinds(), s, e).ok());
      const Status st = CheckKindData(s.kind, s.data);
      ASSERT_TRUE(st.ok()) << name << " after #" << e.seq() << " " << e.type() << ": " << st.message();
    }
  }
}

TEST(KindData, AFoldToAKeyTheMessageDoesNotDeclareIsCorruptionNamingTheEvent) {
  json events = RecordedRunEvents("memory_profile");
  ASSERT_TRUE(events.is_array() && events.size() > 10);
  // A generic record of a field no memory-profile data declares: the event
  // itself fits MemoryEvidenceRecorded ({field, value}); what it folds to does not.
  json bogus = {{"type", kMemRecorded}, {"payload", {{"field", "baselien"}, {"value", {{"hbm", 1}}}}}};
  events.insert(events.begin() + 3, bogus);
  const VerifyResult v = VerifyRunEvents(DefaultKinds(), EventsAsLog("mp", events), SeqHash);
  ASSERT_FALSE(v.ok);
  EXPECT_NE(v.first_divergence.find("event #4"), std::string::npos) << v.first_divergence;
  EXPECT_NE(v.first_divergence.find("corruption"), std::string::npos) << v.first_divergence;
  EXPECT_NE(v.first_divergence.find("baselien"), std::string::npos) << v.first_divergence;
  EXPECT_NE(v.first_divergence.find("MemoryProfileData"), std::string::npos) << v.first_divergence;
}

TEST(KindData, AValueOfTheWrongTypeIsCorruption) {
  const Status s = CheckKindData("torch-profile", json{{"cleanup", 5}});
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
  EXPECT_NE(s.message().find("cleanup"), std::string::npos) << s.message();
  EXPECT_EQ(CheckKindData("serve", json::array()).code(), Code::kCorruption);
  EXPECT_TRUE(CheckKindData("serve", json::object()).ok()) << "a run that folded nothing yet";
}

// ---------------------------------------------------------------- typed spec

// The recorded run's events with its RunSubmitted.spec changed by `edit`.
template <class Edit>
std::vector<proto::Event> RecordedWithSpec(const std::string& name, Edit edit) {
  json events = RecordedRunEvents(name);
  edit(events[0]["payload"]["spec"]);
  return EventsAsLog(name, events);
}

TEST(TypedSpec, TheFoldKeepsTheSpecAsItsKindsMessageWithTodaysDefaultsForFieldsAnOldStoreLacks) {
  const auto log = RecordedWithSpec("torch_profile", [](json&) {});
  const json stored = json::parse(log[0].payload_json())["spec"];
  ASSERT_FALSE(stored.contains("flush_timeout")) << "the recorded run predates flush_timeout";
  const Result<RunState> s = Fold(DefaultKinds(), log);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto& spec = SpecOf<run_specs::TorchProfileSpec>(*s);
  EXPECT_EQ(spec.model(), stored["model"].get<std::string>());
  EXPECT_EQ(spec.tp(), stored["tp"].get<int64_t>());
  EXPECT_EQ(spec.benchmark_success_threshold(), stored["benchmark_success_threshold"].get<double>());
  EXPECT_EQ(spec.torch_profiler_dir(), stored["torch_profiler_dir"].get<std::string>());
  EXPECT_EQ(spec.flush_timeout(), 300) << "a field added since reads its default, not proto3's 0";
  EXPECT_FALSE(s->spec.contains("flush_timeout")) << "the stored document is kept as it was stored";
  EXPECT_THROW(SpecOf<run_specs::ServeSpec>(*s), std::logic_error) << "a torch-profile run has no serve spec";
  EXPECT_THROW(SpecOf<run_specs::ServeSpec>(RunState{}), std::logic_error) << "nothing folded";
}

TEST(TypedSpec, AStoredSpecValueOfTheWrongTypeIsCorruptionWhenFoldedNamingTheKey) {
  for (const char* name : kRecordedRuns) {
    const auto log = RecordedWithSpec(name, [](json& spec) { spec["tp"] = "two"; });
    RunState s;
    const Status st = ApplyStored(DefaultKinds(), s, log[0]);
    EXPECT_EQ(st.code(), Code::kCorruption) << name << ": " << st.message();
    EXPECT_NE(st.message().find("tp"), std::string::npos) << st.message();
    EXPECT_FALSE(Fold(DefaultKinds(), log).ok()) << name;
  }
}

TEST(TypedSpec, AnUndeclaredStoredKeyIsPassedOverByTheFoldAndLeftToVerify) {
  const auto log = RecordedWithSpec("memory_profile", [](json& spec) { spec["helth_timeout_s"] = 30; });
  const Result<RunState> s = Fold(DefaultKinds(), log);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(SpecOf<run_specs::MemoryProfileSpec>(*s).mode(), "standalone");
  EXPECT_FALSE(VerifyRunEvents(DefaultKinds(), log, SeqHash).ok) << "verify still reports the key";
}

TEST(TypedSpec, ASubmittedSpecIsReadAsValidatedAndASpecEditedByHandIsReadAfterARefresh) {
  RunState s;
  s.run_id = "ar1";
  s.kind = "analyse-root";
  s.spec = {{"machine", "sim1"}, {"machine_record", kMachine}, {"profile_root", "/p//"}, {"expected_ranks", 2}};
  EXPECT_THROW(SpecOf<run_specs::AnalyseRootSpec>(s), std::logic_error) << "not decoded yet";
  ASSERT_TRUE(RefreshTypedSpec(s, DefaultKinds().Find("analyse-root")).ok());
  const auto& spec = SpecOf<run_specs::AnalyseRootSpec>(s);
  EXPECT_EQ(spec.profile_root(), "/p") << "as ValidateSpec leaves it";
  EXPECT_EQ(spec.analyse_timeout_s(), 1800) << "ValidateSpec's default";
  EXPECT_EQ(spec.expected_ranks(), 2);
  s.spec["expected_ranks"] = "x";
  EXPECT_EQ(RefreshTypedSpec(s, nullptr).code(), Code::kCorruption);
  EXPECT_EQ(s.typed_spec, nullptr) << "a spec that does not decode leaves none";
}

}  // namespace
}  // namespace npuprof::sm::testing
