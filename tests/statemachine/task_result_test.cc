// A task result as a kind reads it (statemachine/task_result.h): the
// engine's judge keeps its parse, so the kind reads the message the result
// was judged against; an earlier task's recorded result decodes the same way.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "statemachine/run_state.h"
#include "statemachine/task_failure.h"
#include "statemachine/task_result.h"
#include "statemachine/task_schema.h"
#include "task_results.pb.h"

namespace npuprof::sm::testing {
namespace {

using nlohmann::json;

TEST(TaskResult, TheDecodeIsTheJudgesParse) {
  auto decoded = DecodeTaskResult("service.stop", json{{"stopped", true}, {"signals", {"SIGINT"}}, {"pid", 42}});
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const auto* stop = dynamic_cast<const results::ServiceStopResult*>(decoded->get());
  ASSERT_NE(stop, nullptr);
  EXPECT_TRUE(stop->stopped());
  EXPECT_FALSE(stop->already_gone()) << "a field left out reads its default";
  ASSERT_EQ(stop->signals_size(), 1);
  EXPECT_EQ(stop->signals(0), "SIGINT");
  EXPECT_EQ(stop->pid(), 42);

  // What the judge refuses does not decode: the same Status CheckTaskResult gives.
  for (const json& bad : {json{{"pid", "seven"}}, json{{"stoped", true}}, json::array()}) {
    auto refused = DecodeTaskResult("service.stop", bad);
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(refused.status().message(), CheckTaskResult("service.stop", bad).message());
  }
  EXPECT_NE(DecodeTaskResult("service.stop", json{{"stoped", true}}).status().message().find("stoped"),
            std::string::npos);
  // A recorded result may hold a key an older npuprof wrote.
  EXPECT_TRUE(DecodeTaskResult("service.stop", json{{"stoped", true}}, /*tolerate_unknown_keys=*/true).ok());
}

TEST(TaskResult, NoResultReadsAsTheEmptyMessageAndAKindWithoutAMessageHasNone) {
  for (const json& none : {json(nullptr), json::object()}) {
    auto decoded = DecodeTaskResult("torch_profile.control", none);
    ASSERT_TRUE(decoded.ok()) << none;
    const auto* control = dynamic_cast<const results::TorchProfileControlResult*>(decoded->get());
    ASSERT_NE(control, nullptr) << none;
    EXPECT_FALSE(control->ok()) << "no answer is not a 2xx";
    EXPECT_FALSE(control->status().has_number_value());
  }
  auto untyped = DecodeTaskResult("test.a", json{{"anything", 1}});
  ASSERT_TRUE(untyped.ok());
  EXPECT_EQ(untyped->get(), nullptr);
}

TEST(TaskResult, AsTheWrongMessageIsAKindsBugNamingBoth) {
  const json answer = {{"stopped", true}};
  auto decoded = DecodeTaskResult("service.stop", answer);
  ASSERT_TRUE(decoded.ok());
  const TaskResult result("service.stop", answer, *decoded);
  EXPECT_TRUE(result.As<results::ServiceStopResult>().stopped());
  EXPECT_EQ(&result.recorded(), &answer) << "the recorded JSON is the one the event records";
  try {
    (void)result.As<results::TorchProfileControlResult>();
    ADD_FAILURE() << "read as another kind's message";
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TorchProfileControlResult"), std::string::npos) << what;
    EXPECT_NE(what.find("ServiceStopResult"), std::string::npos) << what;
  }
  const TaskResult untyped("test.a", answer, nullptr);
  EXPECT_THROW((void)untyped.As<results::ServiceStopResult>(), std::logic_error);
}

// A launch or a probe that succeeded without saying anything leaves the kind
// nothing to act on: Required throws, so the task fails (kind_failed) and the
// kind's cleanup runs; As still reads the empty message.
TEST(TaskResult, RequiredRefusesASuccessThatCarriedNoResult) {
  for (const json& none : {json(nullptr), json::object()}) {
    auto decoded = DecodeTaskResult("service.launch", none);
    ASSERT_TRUE(decoded.ok());
    const TaskResult result("service.launch", none, *decoded);
    EXPECT_TRUE(result.empty());
    EXPECT_EQ(result.As<results::ServiceLaunchResult>().pid(), 0);
    try {
      (void)result.Required<results::ServiceLaunchResult>();
      ADD_FAILURE() << "an empty launch result was taken: " << none;
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("service.launch task succeeded without a result"), std::string::npos)
          << e.what();
    }
  }
  const json said = {{"runtime_dir", "/rt"}};
  auto decoded = DecodeTaskResult("service.launch", said);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(TaskResult("service.launch", said, *decoded).Required<results::ServiceLaunchResult>().runtime_dir(),
            "/rt");
}

TEST(TaskResult, ARecordedResultDecodesAsTheStateKeepsIt) {
  TaskInfo launch;
  launch.kind = "service.launch";
  launch.result = {{"task_id", "t1"},
                   {"attempt", 1},
                   {"result", {{"pid", 7}, {"port", 9000}, {"runtime_dir", "/rt/s-1"}, {"retired_key", 1}}}};
  auto read = RecordedResult<results::ServiceLaunchResult>(launch);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->pid(), 7);
  EXPECT_EQ(read->port().number_value(), 9000);
  EXPECT_EQ(read->runtime_dir(), "/rt/s-1");

  launch.result = {{"task_id", "t1"}, {"attempt", 1}};  // a failure that kept no result
  read = RecordedResult<results::ServiceLaunchResult>(launch);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->pid(), 0);
  EXPECT_EQ(RecordedOf<results::ServiceLaunchResult>(launch).pid(), 0);

  launch.result["result"] = {{"pid", "seven"}};
  EXPECT_FALSE(RecordedResult<results::ServiceLaunchResult>(launch).ok()) << "a wrong type is not read as 0";
  // RecordedOf, the decisions' read, throws the same failure naming the kind.
  try {
    (void)RecordedOf<results::ServiceLaunchResult>(launch);
    ADD_FAILURE() << "a wrong type decoded";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("service.launch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pid"), std::string::npos) << e.what();
  }
  launch.result["result"] = {{"pid", 7}};
  EXPECT_EQ(RecordedResult<results::ServiceStopResult>(launch).status().code(), Code::kInternal)
      << "another kind's message";
}

// A final failure as a kind reads it: the two texts, typed once, and the
// payload as recorded for what the kind keeps as evidence.
TEST(TaskFailure, ReadsTheTwoTextsAndKeepsThePayload) {
  const json recorded = {{"task_id", "r.t1"}, {"error_kind", "ssh_failed"}, {"error", "connection reset"},
                         {"final", true}, {"blobs", {{"stderr.txt", "ab12"}}}};
  const TaskFailure failure(recorded);
  EXPECT_EQ(failure.error_kind(), "ssh_failed");
  EXPECT_EQ(failure.error(), "connection reset");
  EXPECT_EQ(failure.Text(), "ssh_failed: connection reset");
  EXPECT_EQ(&failure.recorded(), &recorded);
  const json lost = {{"error", "lost"}};
  EXPECT_EQ(TaskFailure(lost).Text(), "lost") << "no class: the sentence alone";
  EXPECT_EQ(failure.Classified(), "ssh_failed: connection reset");
  EXPECT_EQ(TaskFailure(lost).Classified(), "error: lost") << "a text that must be classed says error";
  // What is not a string is no text: never an exception.
  const json odd_payload = {{"error_kind", 3}, {"error", nullptr}};
  const TaskFailure odd(odd_payload);
  EXPECT_EQ(odd.error_kind(), "");
  EXPECT_EQ(odd.error(), "");
  const json not_an_object = json::array();
  EXPECT_EQ(TaskFailure(not_an_object).Text(), "");
}

}  // namespace
}  // namespace npuprof::sm::testing
