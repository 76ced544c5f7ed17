// A task's stored payload read as its message (statemachine/task_payload.h):
// what the machine asked for decodes with its declared types, a key an older
// npuprof wrote is passed over, and a payload that does not fit, or a message
// that is not the task kind's, is an error naming the task and the key.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "statemachine/message_json.h"
#include "statemachine/run_state.h"
#include "statemachine/task_payload.h"
#include "task_payloads.pb.h"

namespace npuprof::sm::testing {
namespace {

using nlohmann::json;

TaskInfo Stop(json payload) {
  TaskInfo t;
  t.task_id = "t7";
  t.kind = "service.stop";
  t.payload = std::move(payload);
  return t;
}

TEST(TaskPayload, WhatWasScheduledDecodes) {
  tasks::ServiceStop asked;
  asked.set_runtime_dir("/rt/service-1");
  asked.set_force(true);
  asked.set_grace_s(15);
  const auto read = PayloadOf<tasks::ServiceStop>(Stop(MessageToJson(asked)));
  EXPECT_EQ(read.runtime_dir(), "/rt/service-1");
  EXPECT_TRUE(read.force());
  EXPECT_FALSE(read.has_pid()) << "a pid not given stays unknown";
  EXPECT_EQ(read.grace_s(), 15);
}

TEST(TaskPayload, AKeyAnOlderNpuprofWroteIsPassedOver) {
  const auto read = PayloadOf<tasks::ServiceStop>(Stop({{"runtime_dir", "/rt"}, {"force", true}, {"retired", 1}}));
  EXPECT_TRUE(read.force());
}

TEST(TaskPayload, APayloadThatDoesNotFitIsAnErrorNamingTheTaskAndTheKey) {
  try {
    (void)PayloadOf<tasks::ServiceStop>(Stop({{"runtime_dir", "/rt"}, {"pid", "seven"}}));
    ADD_FAILURE() << "a payload of the wrong type must not be read";
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("t7"), std::string::npos) << what;
    EXPECT_NE(what.find("pid"), std::string::npos) << what;
  }
  EXPECT_THROW((void)PayloadOf<tasks::ServiceStop>(Stop(json::array())), std::logic_error);
  // A needed key an older npuprof did not write reads its default: the
  // payload was judged when it was scheduled.
  EXPECT_EQ(PayloadOf<tasks::ServiceStop>(Stop({{"force", true}})).runtime_dir(), "");
}

TEST(TaskPayload, ReadingAnotherKindsMessageIsAnError) {
  try {
    (void)PayloadOf<tasks::ServiceLaunch>(Stop({{"runtime_dir", "/rt"}}));
    ADD_FAILURE() << "a stop's payload is not a launch's";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("ServiceLaunch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace npuprof::sm::testing
