// Each run kind's spec is declared in proto/run_specs.proto: a submission
// whose validated spec holds a key the message does not declare is refused
// naming the key (nothing runs), and `verify` reports a stored spec that does
// not fit as corruption.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <set>
#include <vector>

#include "message_fill.h"
#include "recorded_runs.h"
#include "run_specs.pb.h"
#include "sm_test_util.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/replay_verifier.h"
#include "statemachine/run_spec_schema.h"

namespace npuprof::sm::testing {
namespace {

namespace pb = google::protobuf;
using npuprof::testing_support::FilledJson;
using npuprof::testing_support::kRecordedRuns;
using npuprof::testing_support::RecordedRunEvents;

const json kMachine = {{"name", "sim1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}};

std::vector<proto::Event> ToLog(const std::string& run_id, const json& events) {
  std::vector<proto::Event> log;
  for (const auto& e : events) {
    proto::Event pe;
    pe.set_run_id(run_id);
    pe.set_seq(log.size() + 1);
    pe.set_type(e["type"].get<std::string>());
    pe.set_payload_json(e["payload"].dump());
    pe.set_prev_hash(log.empty() ? "" : log.back().hash());
    pe.set_hash(std::to_string(pe.seq()));
    log.push_back(pe);
  }
  return log;
}

std::string SeqHash(const proto::Event& e) { return std::to_string(e.seq()); }

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

TEST(RunSpec, EveryMessageFilledIsASpecItsKindAccepts) {
  const pb::FileDescriptor* file = run_specs::ProbeSpec::descriptor()->file();
  for (int i = 0; i < file->message_type_count(); ++i) {
    const pb::Descriptor* d = file->message_type(i);
    const std::string kind = SpecKindOf(*d);
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

TEST(RunSpec, TheRecordedRunsSpecsFitAndAStoredSpecWithAnUnknownKeyIsCorruption) {
  for (const char* name : kRecordedRuns) {
    json events = RecordedRunEvents(name);
    ASSERT_TRUE(events.is_array() && !events.empty()) << name;
    const VerifyResult good = VerifyRunEvents(DefaultKinds(), ToLog(name, events), SeqHash);
    ASSERT_TRUE(good.ok) << name << ": " << good.first_divergence;
    events[0]["payload"]["spec"]["helth_timeout_s"] = 30;
    const VerifyResult bad = VerifyRunEvents(DefaultKinds(), ToLog(name, events), SeqHash);
    ASSERT_FALSE(bad.ok) << name;
    EXPECT_NE(bad.first_divergence.find("event #1"), std::string::npos) << bad.first_divergence;
    EXPECT_NE(bad.first_divergence.find("corruption"), std::string::npos) << bad.first_divergence;
    EXPECT_NE(bad.first_divergence.find("helth_timeout_s"), std::string::npos) << bad.first_divergence;
  }
}

}  // namespace
}  // namespace npuprof::sm::testing
