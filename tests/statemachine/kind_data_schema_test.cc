// Each run kind's data (RunState.data) is declared in proto/kind_data.proto
// and judged by `verify` after every event the kind folds: the recorded runs
// fit their messages at every step, and a fold to a key the message does not
// declare is reported as corruption naming the event.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <memory>
#include <set>
#include <vector>

#include "kind_data.pb.h"
#include "message_fill.h"
#include "recorded_runs.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/kind_data_schema.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/memory_profile_events.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/replay_verifier.h"

namespace npuprof::sm {
namespace {

namespace pb = google::protobuf;
using npuprof::testing_support::FilledJson;
using npuprof::testing_support::kRecordedRuns;
using npuprof::testing_support::RecordedRunEvents;

std::string SeqHash(const proto::Event& e) { return std::to_string(e.seq()); }

std::vector<proto::Event> ToLog(const std::string& run_id, const json& events) {
  std::vector<proto::Event> log;
  for (const auto& e : events) {
    proto::Event pe;
    pe.set_run_id(run_id);
    pe.set_seq(log.size() + 1);
    pe.set_type(e["type"].get<std::string>());
    pe.set_time_ms(e.value("time_ms", int64_t{0}));
    pe.set_payload_json(e["payload"].dump());
    pe.set_cause(e.value("cause", ""));
    pe.set_prev_hash(log.empty() ? "" : log.back().hash());
    pe.set_hash(std::to_string(pe.seq()));
    log.push_back(pe);
  }
  return log;
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
    ASSERT_FALSE(kind.empty()) << d->name() << " has no (data_of)";
    const json data = json::parse(FilledJson(*d));
    const Status s = CheckKindData(kind, data);
    EXPECT_TRUE(s.ok()) << kind << ": " << s.message();
  }
}

TEST(KindData, TheRecordedRunsFitTheirKindsMessageAfterEveryEvent) {
  for (const char* name : kRecordedRuns) {
    const auto log = ToLog(name, RecordedRunEvents(name));
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
  const VerifyResult v = VerifyRunEvents(DefaultKinds(), ToLog("mp", events), SeqHash);
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

}  // namespace
}  // namespace npuprof::sm
