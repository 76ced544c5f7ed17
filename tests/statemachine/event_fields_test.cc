// The shared event types' fields are checked before a fold reads them.
#include <gtest/gtest.h>

#include "statemachine/event_fields.h"

namespace npuprof::sm {
namespace {

using json = nlohmann::json;

TEST(EventFields, WellFormedPayloadsPass) {
  EXPECT_TRUE(CheckEventFields("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "probe.npu_smi"}, {"attempt", 1}}).ok());
  EXPECT_TRUE(CheckEventFields("StateChanged", {{"from", "queued"}, {"to", "launching"}}).ok());
  EXPECT_TRUE(CheckEventFields("RunFinished", {{"status", "ok"}}).ok());
  EXPECT_TRUE(CheckEventFields("SomeKindEvent", {{"anything", 1}}).ok()) << "kind events are the kinds' business";
}

TEST(EventFields, WrongTypesMissingFieldsAndNonObjectsAreCorruption) {
  Status s = CheckEventFields("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "k"}, {"attempt", "one"}});
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("TaskScheduled payload field 'attempt' is string where a whole number >= 0 is needed"),
            std::string::npos)
      << s.message();
  s = CheckEventFields("TaskScheduled", {{"task_id", "r.t1"}, {"kind", "k"}, {"attempt", -1}});
  EXPECT_FALSE(s.ok());
  s = CheckEventFields("TimerScheduled", {{"timer_id", "x"}});
  EXPECT_NE(s.message().find("has no 'deadline_ms'"), std::string::npos) << s.message();
  s = CheckEventFields("StateChanged", {{"to", 3}});
  EXPECT_FALSE(s.ok());
  s = CheckEventFields("DevicesLeased", {{"devices", "0,1"}});
  EXPECT_FALSE(s.ok());
  s = CheckEventFields("RunFinished", json::array());
  EXPECT_NE(s.message().find("not a JSON object"), std::string::npos);
  EXPECT_FALSE(CheckEventFields("Anything", 5).ok());
}

}  // namespace
}  // namespace npuprof::sm
