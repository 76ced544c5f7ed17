// The shared events' payloads are judged against proto/events.proto before a
// fold reads them; every message round-trips through its JSON mapping.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <memory>
#include <set>

#include "events.pb.h"
#include "kind_events.pb.h"
#include "message_fill.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/device_lease.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/event_schema.h"
#include "statemachine/event_types.h"
#include "statemachine/machine_check_machine.h"
#include "statemachine/machine_inventory.h"
#include "statemachine/memory_profile_events.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/memory_profile_nodes.h"
#include "statemachine/probe_machine.h"
#include "statemachine/serve_machine.h"
#include "statemachine/sweep_machine.h"
#include "statemachine/torch_profile_analysis.h"
#include "statemachine/torch_profile_machine.h"

namespace npuprof::sm {
namespace {

using json = nlohmann::json;
namespace pb = google::protobuf;
using npuprof::testing_support::FillEveryField;
using npuprof::testing_support::FilledJson;

Status Strict(std::string_view type, const json& payload) {
  return CheckEventPayload(type, payload, UnknownKeys::kReject);
}

TEST(EventSchema, WellFormedPayloadsPass) {
  EXPECT_TRUE(Strict("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "probe.npu_smi"}, {"attempt", 1}}).ok());
  EXPECT_TRUE(Strict("StateChanged", {{"from", "queued"}, {"to", "launching"}}).ok());
  EXPECT_TRUE(Strict("RunFinished", {{"status", "ok"}}).ok());
  EXPECT_TRUE(Strict("DevicesRequested", {{"machine", "m"}, {"devices", nullptr}, {"count", 2}}).ok())
      << "null devices means any free ones";
  EXPECT_TRUE(Strict("TaskSucceeded", {{"task_id", "t"}, {"result", {1, "two", {{"x", 3.5}}}}}).ok())
      << "a result is any JSON value";
  EXPECT_TRUE(Strict("SomeKindEvent", {{"anything", 1}}).ok()) << "a type in no file (a test's or a plugin's kind)";
}

TEST(EventSchema, WrongTypesMissingFieldsAndNonObjectsAreCorruption) {
  Status s = Strict("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "k"}, {"attempt", "one"}});
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("TaskScheduled payload does not match proto/events.proto"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("attempt"), std::string::npos) << s.message();
  s = Strict("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "k"}, {"attempt", -1}});
  EXPECT_EQ(s.code(), Code::kCorruption) << "an attempt is a whole number >= 0";
  s = Strict("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "k"}, {"attempt", 1.5}});
  EXPECT_EQ(s.code(), Code::kCorruption) << "an attempt is a whole number";
  s = Strict("TimerScheduled", {{"timer_id", "x"}});
  EXPECT_NE(s.message().find("has no 'deadline_ms'"), std::string::npos) << s.message();
  s = Strict("StateChanged", {{"to", 3}});
  EXPECT_EQ(s.code(), Code::kCorruption);
  s = Strict("DevicesLeased", {{"devices", "0,1"}});
  EXPECT_EQ(s.code(), Code::kCorruption);
  s = Strict("TaskScheduled", {{"task_id", "t"}, {"kind", "k"}, {"payload", {1, 2}}});
  EXPECT_EQ(s.code(), Code::kCorruption) << "a task payload is an object";
  s = Strict("RunFinished", json::array());
  EXPECT_NE(s.message().find("not a JSON object"), std::string::npos);
  EXPECT_EQ(Strict("Anything", 5).code(), Code::kCorruption);
}

TEST(EventSchema, UnknownKeysAreRejectedByVerifyAndToleratedByTheFold) {
  const json payload = {{"status", "ok"}, {"statsu", "typo"}};
  const Status strict = CheckEventPayload("RunFinished", payload, UnknownKeys::kReject);
  EXPECT_EQ(strict.code(), Code::kCorruption);
  EXPECT_NE(strict.message().find("statsu"), std::string::npos) << strict.message();
  EXPECT_TRUE(CheckEventPayload("RunFinished", payload, UnknownKeys::kTolerate).ok());
  // Tolerating unknown keys never tolerates a wrong type.
  EXPECT_FALSE(CheckEventPayload("RunFinished", {{"status", 1}, {"x", 1}}, UnknownKeys::kTolerate).ok());
}

TEST(EventSchema, EveryEventTypeTheCodeNamesHasAMessage) {
  for (const char* type :
       {ev::kRunSubmitted, ev::kStateChanged, ev::kTaskScheduled, ev::kTaskSucceeded, ev::kTaskFailed,
        ev::kTaskRetryScheduled, ev::kTaskRedispatched, ev::kTaskResultIgnored, ev::kTaskAbandoned,
        ev::kTimerScheduled, ev::kTimerFired, ev::kTimerCancelled, ev::kCancelRequested, ev::kRunRecovered,
        ev::kRunFinished, ev::kSignalReceived, ev::kWatchRequested, ev::kChildRunRequested,
        ev::kChildCancelRequested, kDevicesRequested, kDevicesLeased, kDevicesReleased, kDevicesUnavailable,
        kDevicesChecked})
    EXPECT_TRUE(HasEventSchema(type)) << type;
  EXPECT_FALSE(HasEventSchema("TaskPolicy")) << "a part of TaskScheduled, not an event";
  EXPECT_EQ(SchemaEventTypes().size(), 24u);
}

TEST(EventSchema, EveryMessageRoundTripsThroughItsStoredJson) {
  const pb::FileDescriptor* file = events::RunSubmitted::descriptor()->file();
  for (const std::string& type : SchemaEventTypes()) {
    const pb::Descriptor* d = file->FindMessageTypeByName(type);
    ASSERT_NE(d, nullptr) << type;
    const pb::Message* proto = pb::MessageFactory::generated_factory()->GetPrototype(d);
    std::unique_ptr<pb::Message> original(proto->New());
    FillEveryField(*original);
    std::string text;
    pb::util::JsonPrintOptions print;
    print.preserve_proto_field_names = true;
    ASSERT_TRUE(pb::util::MessageToJsonString(*original, &text, print).ok()) << type;
    const json parsed = json::parse(text);
    // Every field is present under the name the fold reads.
    for (int i = 0; i < d->field_count(); ++i) EXPECT_TRUE(parsed.contains(d->field(i)->name())) << type << text;
    const Status check = CheckEventPayload(type, text, parsed, UnknownKeys::kReject);
    EXPECT_TRUE(check.ok()) << type << ": " << check.message() << "\n" << text;
    std::unique_ptr<pb::Message> back(proto->New());
    ASSERT_TRUE(pb::util::JsonStringToMessage(text, back.get()).ok()) << type;
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(*original, *back)) << type << "\n" << text;
  }
}

// The kinds' own events (proto/kind_events.proto): every type the built-in
// kinds emit has a message, each round-trips, and verify's judgement names
// the key.
TEST(EventSchema, EveryKindEventTypeHasAMessageThatRoundTrips) {
  std::vector<std::string> types = {kProbeRecorded, kProbeFailed, kMachineChecked, kServiceLaunched, kServiceReady,
                                    kServiceFailed, kServiceStopRequested, kServiceStopped, kServiceStopFailed,
                                    kSweepChildFinished, kTpStepFailed, kTpWorkloadGated, kTpCleanupStarted,
                                    kTpAnalysisGated, kTpFlushWaited, kTpAnalyseLimitChosen, kTpCaptureChecked, kMemRecorded, kMemStepFailed, kMemRunFailing, kMemNodeEvidence,
                                    kMachineAdded, kMachineRemoved, kMachineHostKeyAccepted, kDevicesQuarantined,
                                    kDevicesCleared, kClockMeasured, kHbmSampled};
  for (const MemoryEvidenceEvent& e : MemoryEvidenceEvents()) types.emplace_back(e.type);
  for (const std::string& type : types) EXPECT_TRUE(HasKindEventSchema(type)) << type;
  const pb::FileDescriptor* file = kind_events::ProbeRecorded::descriptor()->file();
  for (const std::string& type : KindEventTypes()) {
    EXPECT_FALSE(HasEventSchema(type)) << type << " is declared twice";
    const std::string text = FilledJson(*file->FindMessageTypeByName(type));
    const Status s = CheckEventPayload(type, text, json::parse(text), UnknownKeys::kReject);
    EXPECT_TRUE(s.ok()) << type << ": " << s.message() << "\n" << text;
  }
  EXPECT_EQ(KindEventTypes().size(), std::set<std::string>(types.begin(), types.end()).size())
      << "a message for a type no kind emits";
}

TEST(EventSchema, AKindEventWithAnUndeclaredKeyOrAWrongTypeIsCorruption) {
  EXPECT_TRUE(Strict(kMemStepFailed, {{"step", "export"}, {"error_kind", "export_failed"}, {"error", "x"}}).ok())
      << Strict(kMemStepFailed, {{"step", "export"}, {"error_kind", "export_failed"}, {"error", "x"}}).message();
  Status s = Strict(kMemStepFailed, {{"stpe", "export"}, {"error", "x"}});
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("proto/kind_events.proto"), std::string::npos) << s.message();
  s = Strict(kTpCleanupStarted, {{"reason", 3}});
  EXPECT_EQ(s.code(), Code::kCorruption) << s.message();
}

}  // namespace
}  // namespace npuprof::sm
