// The shared events' payloads are judged against proto/events.proto before a
// fold reads them; every message round-trips through its JSON mapping.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <memory>

#include "events.pb.h"
#include "message_fill.h"
#include "statemachine/device_lease.h"
#include "statemachine/event_schema.h"
#include "statemachine/event_types.h"

namespace npuprof::sm {
namespace {

using json = nlohmann::json;
namespace pb = google::protobuf;
using npuprof::testing_support::FillEveryField;

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
  EXPECT_TRUE(Strict("SomeKindEvent", {{"anything", 1}}).ok()) << "kind events are the kinds' business";
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

}  // namespace
}  // namespace npuprof::sm
