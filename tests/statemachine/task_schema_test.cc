// Every task payload is judged against its message in
// proto/task_payloads.proto: when a machine schedules it and when a worker
// receives it. Every message round-trips through its JSON mapping, and every
// task the recorded runs scheduled decodes against the message of its kind.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <google/protobuf/wrappers.pb.h>

#include <cmath>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "message_fill.h"
#include "recorded_runs.h"
#include "sm_test_util.h"
#include "statemachine/json_message_table.h"
#include "statemachine/message_json.h"
#include "statemachine/replay_verifier.h"
#include "statemachine/task_policies.h"
#include "statemachine/task_schema.h"
#include "remote_records.pb.h"
#include "task_payloads.pb.h"
#include "task_results.pb.h"

namespace npuprof::sm::testing {
namespace {

namespace pb = google::protobuf;
using npuprof::testing_support::FilledJson;
using npuprof::testing_support::kRecordedRuns;
using npuprof::testing_support::RecordedRunEvents;

const json kMachine = {{"name", "sim1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}};

TEST(TaskSchema, EveryTaskKindWithAPolicyHasAMessageAndNoMessageIsForAnUnknownKind) {
  std::set<std::string> with_policy;
  for (const NamedTaskPolicy& p : TaskPolicies()) with_policy.insert(std::string(p.task_kind));
  const std::vector<std::string> kinds = SchemaTaskKinds();
  const std::set<std::string> with_message(kinds.begin(), kinds.end());
  EXPECT_EQ(kinds.size(), with_message.size()) << "a task kind has two messages";
  for (const std::string& k : with_policy) EXPECT_TRUE(with_message.count(k)) << k << " has a policy but no message";
  for (const std::string& k : with_message)
    EXPECT_TRUE(with_policy.count(k) || k == "service.watch") << k << " has a message but no policy";
  // service.watch's policy follows its poll period (ServeWatchPolicy), not the table.
  for (const std::string& k : kinds) EXPECT_TRUE(HasTaskSchema(k)) << k;
  EXPECT_FALSE(HasTaskSchema("test.a")) << "a kind a test registers has no message";
}

TEST(TaskSchema, EveryMessageRoundTripsThroughItsJsonMapping) {
  const pb::FileDescriptor* file = tasks::Machine::descriptor()->file();
  int checked = 0;
  for (int i = 0; i < file->message_type_count(); ++i) {
    const pb::Descriptor* d = file->message_type(i);
    const std::string kind = TaskKindOf(*d);
    if (kind.empty()) continue;
    std::unique_ptr<pb::Message> filled;
    const std::string text = FilledJson(*d, &filled);
    EXPECT_TRUE(CheckTaskPayloadText(kind, text).ok()) << kind << ": " << CheckTaskPayloadText(kind, text).message();
    std::unique_ptr<pb::Message> back(filled->New());
    ASSERT_TRUE(DecodeTaskPayload(kind, text, *back).ok()) << kind << ": " << text;
    EXPECT_TRUE(pb::util::MessageDifferencer::Equals(*filled, *back)) << kind << ": " << text;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST(TaskSchema, AMissingNeededKeyAWrongTypeAndAnUndeclaredKeyAreRefusedNamingTheKey) {
  const json good = {{"machine", kMachine}, {"phase", "baseline"}, {"step", "baseline"}};
  EXPECT_TRUE(CheckTaskPayload("memory.npu_smi", good).ok()) << CheckTaskPayload("memory.npu_smi", good).message();

  json missing = good;
  missing.erase("phase");
  Status s = CheckTaskPayload("memory.npu_smi", missing);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("memory.npu_smi task payload has no 'phase'"), std::string::npos) << s.message();

  json wrong = good;
  wrong["phase"] = 3;
  s = CheckTaskPayload("memory.npu_smi", wrong);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("phase"), std::string::npos) << s.message();

  json typo = good;
  typo["phsae"] = "baseline";
  s = CheckTaskPayload("memory.npu_smi", typo);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << "a misspelled key is an error, never a silent default";
  EXPECT_NE(s.message().find("phsae"), std::string::npos) << s.message();

  json bad_machine = good;
  bad_machine["machine"]["port"] = "twenty-two";
  EXPECT_EQ(CheckTaskPayload("memory.npu_smi", bad_machine).code(), Code::kInvalidArgument) << "the parts are judged too";

  EXPECT_EQ(CheckTaskPayload("memory.npu_smi", json::array()).code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckTaskPayloadText("memory.npu_smi", "{not json").code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckTaskPayloadText("memory.npu_smi", "[1]").code(), Code::kInvalidArgument);
  EXPECT_TRUE(CheckTaskPayloadText("test.a", "{\"anything\": 1}").ok()) << "no message: the handler reads it";
}

TEST(TaskSchema, NullMeansNotGivenForAFieldWithPresence) {
  const json launch = {{"machine", kMachine},   {"run_id", "r"},           {"launch_no", 1},
                       {"runtime_dir", "/x/r"}, {"model", "/models/m"},    {"served_model_name", nullptr},
                       {"devices", nullptr},    {"port", nullptr},         {"wrap_script", nullptr},
                       {"env", json::object()}, {"extra_args", json::array()}};
  ASSERT_TRUE(CheckTaskPayload("service.launch", launch).ok()) << CheckTaskPayload("service.launch", launch).message();
  tasks::ServiceLaunch out;
  ASSERT_TRUE(DecodeTaskPayload("service.launch", launch.dump(), out).ok());
  EXPECT_FALSE(out.has_port());
  EXPECT_FALSE(out.has_served_model_name());
  EXPECT_EQ(out.machine().host(), "127.0.0.1");
}

TEST(TaskSchema, DecodingIntoAnotherKindsMessageIsAProgrammingError) {
  tasks::MemoryExport out;
  const Status s = DecodeTaskPayload("memory.npu_smi", R"({"machine":{"host":"h","user":"u"},"phase":"p"})", out);
  EXPECT_EQ(s.code(), Code::kInternal) << s.message();
}

TEST(TaskSchema, ARefusedPayloadIsRecordedAndHandedToTheEngine) {
  RunState state;
  state.run_id = "r1";
  state.kind = "probe";
  Decision d(*DefaultKinds().Find("probe"), state, 1000, "test");
  const std::string id = d.ScheduleTask("probe.npu_smi", json{{"machine", kMachine}, {"busy_treshold_mb", 100}});
  EXPECT_FALSE(d.failed()) << "the run, not the decision, pays for it";
  ASSERT_EQ(d.events().size(), 1u);
  EXPECT_EQ(d.events()[0].type, ev::kTaskScheduled) << "the log shows what was asked";
  auto refused = d.TakeRefusedTasks();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].first, id);
  EXPECT_NE(refused[0].second.find("busy_treshold_mb"), std::string::npos) << refused[0].second;
  EXPECT_TRUE(d.TakeRefusedTasks().empty());
}

TEST(TaskSchema, AMessageIsWrittenAsItsJsonWithIntegersAsNumbersAndPresenceKept) {
  tasks::ServiceLaunch p;
  p.set_run_id("r1");
  p.set_health_timeout_s(int64_t{1} << 40);
  p.add_devices(3);
  (*p.mutable_env())["A"] = "b";
  const json j = MessageToJson(p);
  EXPECT_EQ(j["health_timeout_s"], int64_t{1} << 40) << "a 64-bit integer is a JSON number, not a string";
  EXPECT_EQ(j["launch_no"], 0) << "a field without presence is written with its default (a needed key stays present)";
  EXPECT_EQ(j["model"], "");
  EXPECT_FALSE(j.contains("port")) << "an optional field left unset is not given";
  EXPECT_FALSE(j.contains("machine")) << "a message field left unset is not given";
  EXPECT_EQ(j["devices"], json::array({3}));
  EXPECT_EQ(j["env"], json({{"A", "b"}}));
  EXPECT_EQ(j["extra_args"], json::array());
  p.set_port(0);
  EXPECT_EQ(MessageToJson(p)["port"], 0) << "an optional field set to its default is given";
  // What protobuf's own parser reads back is the message.
  p.mutable_machine()->set_host("h");
  tasks::ServiceLaunch back;
  ASSERT_TRUE(DecodeTaskPayload("service.launch", MessageToJson(p).dump(), back).ok());
  EXPECT_TRUE(pb::util::MessageDifferencer::Equals(p, back));
}

TEST(TaskSchema, APayloadOrResultKeyInCamelCaseIsRefused) {
  const Status p = CheckTaskPayload(
      "memory.infer", json{{"machine", kMachine}, {"max_tokens", 8}, {"timeout_s", 1}, {"servedModelName", "m"}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.message().find("servedModelName: write the field's name, served_model_name"), std::string::npos)
      << p.message();
  tasks::MemoryExport out;
  EXPECT_FALSE(DecodeTaskPayload("memory.export",
                                 R"({"machine":{"host":"h","user":"u"},"msprof_dir":"/d","timeoutS":1})", out)
                   .ok());
  EXPECT_FALSE(CheckTaskResult("probe.npu_smi", json{{"busyThresholdMb", 1}}).ok());
}

// protobuf's parser reads "yes", "y", "t" and "1" as a true bool; the mapping
// writes true or false, and so must whoever answers: a stop that says
// "stopped": "yes" is refused, never read as a stop. What is stored was
// judged when it was written, and is read as stored (an older npuprof's
// store stays readable).
TEST(TaskSchema, ABoolWrittenAsAStringIsRefusedNamingTheKey) {
  for (const json& bad : {json("yes"), json("1"), json("t"), json("false")}) {
    const Status s = CheckTaskResult("service.stop", json{{"stopped", bad}});
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("stopped: a bool is written true or false"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(CheckTaskResult("service.stop", json{{"stopped", true}, {"already_gone", nullptr}}).ok());
  const Status nested = CheckTaskResult(
      "torch_profile.requests", json{{"results", json::array({json{{"ok", true}}, json{{"ok", "true"}}})}});
  EXPECT_NE(nested.message().find("results[1].ok: a bool"), std::string::npos) << nested.message();
  const Status payload = CheckTaskPayload(
      "service.stop", json{{"machine", kMachine}, {"runtime_dir", "/rt"}, {"grace_s", 10}, {"force", "yes"}});
  EXPECT_NE(payload.message().find("force: a bool"), std::string::npos) << payload.message();
  EXPECT_TRUE(DecodeTaskResult("service.stop", json{{"stopped", "yes"}}, /*tolerate_unknown_keys=*/true).ok())
      << "read as stored";
}

TEST(TaskSchema, WrappersFloatsAndNonFiniteNumbersAreWrittenAsTheMappingSays) {
  pb::Int64Value big;
  big.set_value(int64_t{1} << 40);
  EXPECT_EQ(MessageToJson(big), int64_t{1} << 40) << "a wrapper is its value, a 64-bit one a number";
  pb::FloatValue f;
  f.set_value(0.1f);
  EXPECT_EQ(MessageToJson(f), 0.1) << "the shortest decimal of the float";
  pb::BytesValue raw;
  raw.set_value(std::string("\x00\xff ab", 5));
  EXPECT_EQ(MessageToJson(raw), "AP8gYWI=") << "bytes are base64, any byte included";
  tasks::InferenceWindow w;
  w.set_start_us(std::nan(""));
  EXPECT_TRUE(MessageToJson(w)["start_us"].is_null());
}

TEST(TaskSchema, EveryFilledMessageIsWrittenAsTheJsonItIsParsedFrom) {
  // Task payloads, task results, and the records a handler writes on a
  // target and reads back (proto/remote_records.proto).
  for (const pb::FileDescriptor* file : {tasks::Machine::descriptor()->file(),
                                         results::ProbeNpuSmiResult::descriptor()->file(),
                                         records::LaunchRecord::descriptor()->file()}) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      std::unique_ptr<pb::Message> filled;
      FilledJson(*file->message_type(i), &filled);
      std::unique_ptr<pb::Message> back(filled->New());
      const std::string text = MessageToJson(*filled).dump();
      ASSERT_FALSE(JsonMessageTable::Parse(text, *back, false).has_value()) << text;
      EXPECT_TRUE(pb::util::MessageDifferencer::Equals(*filled, *back)) << file->message_type(i)->name() << ": " << text;
    }
  }
}

TEST(TaskSchema, ScheduleTakesTheKindFromTheMessageThePolicyFromTheTableAndTheMachineFromTheRun) {
  RunState state;
  state.run_id = "r1";
  state.kind = "memory-profile";
  state.spec = {{"machine_record", kMachine}};
  Decision d(*DefaultKinds().Find("memory-profile"), state, 1000, "test");
  tasks::MemoryExport p;
  p.set_step("export");
  p.set_msprof_dir("/rt/msprof_data");
  p.set_timeout_s(1860);
  const std::string id = d.Schedule(p);
  ASSERT_FALSE(d.failed()) << d.status().message();
  EXPECT_TRUE(d.TakeRefusedTasks().empty());
  const TaskInfo* t = d.state().FindTask(id);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->kind, "memory.export");
  EXPECT_EQ(t->payload["machine"], kMachine) << "the run's machine record, as the inventory recorded it";
  EXPECT_EQ(t->payload["timeout_s"], 1860);
  EXPECT_EQ(t->policy.lease_ms, PolicyFor("memory-profile", "memory.export").lease_ms);
  EXPECT_EQ(t->policy.max_attempts, PolicyFor("memory-profile", "memory.export").max_attempts);

  // A run whose machine record the message does not declare: refused as any payload.
  state.spec["machine_record"]["pasword"] = "x";
  Decision bad(*DefaultKinds().Find("memory-profile"), state, 1000, "test");
  bad.Schedule(p);
  const auto refused = bad.TakeRefusedTasks();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].second.find("pasword"), std::string::npos) << refused[0].second;

  // A message that is no task payload is a bug: the decision fails.
  Decision wrong(*DefaultKinds().Find("memory-profile"), state, 1000, "test");
  EXPECT_EQ(wrong.Schedule(tasks::Machine()), "");
  EXPECT_TRUE(wrong.failed());
  EXPECT_TRUE(wrong.events().empty());
}

TEST(TaskSchema, AResultThatDoesNotFitItsMessageFailsTheTaskFinallyWhoeverAnswered) {
  // The broker's own check, whatever worker answered (ours holds its
  // handlers to the message before answering; a foreign one may not).
  Driver run("p1", DefaultKinds());
  run.Submit("probe", json{{"machine", "sim1"}, {"machine_record", kMachine}});
  std::string id;
  for (const auto& [tid, t] : run.state().tasks) id = tid;
  ASSERT_EQ(run.task(id).kind, "probe.npu_smi");
  const auto events = run.Report(id, 1, true, 2000, false, json{{"devices", json::array()}, {"smuggled", "x"}});
  for (const auto& e : events) EXPECT_NE(e.type, ev::kTaskSucceeded) << "nothing undeclared reaches the log";
  EXPECT_EQ(run.task(id).status, TaskStatus::kFailed);
  EXPECT_EQ(run.task(id).result["error_kind"], "bad_result");
  EXPECT_EQ(run.task(id).result["final"], true) << "an answer that does not fit is not retried";
  const std::string error = run.task(id).result["error"];
  EXPECT_NE(error.find("smuggled"), std::string::npos) << error;
  EXPECT_NE(error.find("w1"), std::string::npos) << "names the worker: " << error;
  EXPECT_EQ(run.state().status, RunStatus::kFailed) << "the probe kind's failure path ran";

  // A failure's result that does not fit is dropped; the failure stands.
  Driver other("p2", DefaultKinds());
  other.Submit("probe", json{{"machine", "sim1"}, {"machine_record", kMachine}});
  for (const auto& [tid, t] : other.state().tasks) id = tid;
  other.Report(id, 1, false, 2000, false, json{{"smuggled", "x"}}, "ssh_failed");
  EXPECT_EQ(other.task(id).result["error_kind"], "ssh_failed");
  EXPECT_FALSE(other.task(id).result.contains("result"));
  EXPECT_NE(other.task(id).result["error"].get<std::string>().find("dropped"), std::string::npos);
  // What the log holds verifies.
  for (const auto* r : {&run, &other})
    EXPECT_TRUE(VerifyRunEvents(DefaultKinds(), r->log(), [](const proto::Event& e) { return e.hash(); }).ok);
}

// A kind that asks for a task with a misspelled key, then cleans up with a
// good one when that task fails.
class MisspellingKind : public RunKind {
 public:
  std::string_view name() const override { return "misspelling"; }
  const TransitionTable& transitions() const override {
    static const TransitionTable table({{"queued", "working"},
                                        {"working", "cleanup"},
                                        {"cleanup", "failed"},
                                        {"working", "completed"},
                                        {"queued", "cancelled"},
                                        {"working", "cancelled"},
                                        {"cleanup", "cancelled"}},
                                       {"completed", "failed", "cancelled"});
    return table;
  }
  Status ValidateSpec(json&) const override { return Status::Ok(); }
  void OnStart(Decision& d) const override {
    d.Transition("working");
    d.ScheduleTask("memory.npu_smi", json{{"machine", kMachine}, {"phsae", "baseline"}});
  }
  void OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult&) const override {
    if (task.kind == "machine.check") d.Finish(RunStatus::kFailed, d.state().error);
  }
  void OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const override {
    EXPECT_EQ(task.kind, "memory.npu_smi");
    EXPECT_EQ(failure.error_kind(), "bad_payload");
    EXPECT_EQ(failure.recorded()["final"], true);
    d.Transition("cleanup", failure.error());
    d.ScheduleTask("machine.check", json{{"machine", kMachine}});
  }
};

TEST(TaskSchema, ATaskWhosePayloadIsRefusedFailsAtOnceAndTheKindsFailurePathRuns) {
  KindRegistry kinds;
  kinds.Register(std::make_unique<MisspellingKind>());
  Driver run("bad", kinds);
  const auto events = run.Submit("misspelling", json::object(), 1000);
  std::vector<std::string> types;
  for (const auto& e : events) types.push_back(e.type);
  // Scheduled, failed at once (final), the cleanup scheduled and in flight.
  const auto failed = std::find(types.begin(), types.end(), ev::kTaskFailed);
  ASSERT_NE(failed, types.end()) << json(types).dump();
  const json& f = events[failed - types.begin()].payload;
  EXPECT_EQ(f["task_id"], "bad.t1");
  EXPECT_EQ(f["error_kind"], "bad_payload");
  EXPECT_NE(f["error"].get<std::string>().find("has no 'phase'"), std::string::npos) << f.dump();
  EXPECT_EQ(run.state().tasks.at("bad.t1").status, TaskStatus::kFailed) << "never dispatched";
  EXPECT_TRUE(run.state().tasks.at("bad.t2").in_flight()) << "the cleanup task was scheduled";
  EXPECT_EQ(run.state().state, "cleanup");
  // The stored events fold to the same state.
  const RunState folded = Fold(kinds, run.log()).value();
  EXPECT_EQ(folded.state, "cleanup");
  EXPECT_EQ(folded.tasks.at("bad.t1").status, TaskStatus::kFailed);
}

// The recorded memory-profile and torch-profile runs were scheduled by the
// machines before the messages existed: every task payload they hold decodes
// against the message of its kind.
TEST(TaskSchema, EveryTaskTheRecordedRunsScheduledMatchesItsMessage) {
  std::set<std::string> kinds_seen;
  for (const char* name : kRecordedRuns) {
    for (const auto& e : RecordedRunEvents(name)) {
      if (e["type"] != ev::kTaskScheduled) continue;
      const std::string kind = e["payload"]["kind"];
      const Status s = CheckTaskPayload(kind, e["payload"]["payload"]);
      EXPECT_TRUE(s.ok()) << name << ": " << s.message();
      EXPECT_TRUE(HasTaskSchema(kind)) << kind;
      kinds_seen.insert(kind);
    }
  }
  EXPECT_GE(kinds_seen.size(), 15u);
}

TEST(TaskSchema, EveryTaskKindHasAResultMessageThatRoundTrips) {
  EXPECT_EQ(ResultSchemaTaskKinds(), SchemaTaskKinds()) << "a result message per payload message, in the same order";
  const pb::FileDescriptor* file = results::HostKeyAccepted::descriptor()->file();
  int checked = 0;
  for (int i = 0; i < file->message_type_count(); ++i) {
    const pb::Descriptor* d = file->message_type(i);
    const std::string kind = ResultKindOf(*d);
    if (kind.empty()) continue;
    const std::string text = FilledJson(*d);
    const Status s = CheckTaskResult(kind, json::parse(text));
    EXPECT_TRUE(s.ok()) << kind << ": " << s.message() << "\n" << text;
    ++checked;
  }
  EXPECT_EQ(checked, 24);  // memory.operator_memory and service.hbm_sample among them
}

TEST(TaskSchema, AResultKeyTheMessageDoesNotDeclareIsRefusedAndNoResultPasses) {
  EXPECT_TRUE(CheckTaskResult("memory.export", {{"status", "ok"}, {"exit_code", 0}}).ok());
  const Status s = CheckTaskResult("memory.export", {{"status", "ok"}, {"exit_cdoe", 0}});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("exit_cdoe"), std::string::npos) << s.message();
  EXPECT_EQ(CheckTaskResult("memory.export", {{"status", 3}}).code(), Code::kInvalidArgument) << "a wrong type";
  EXPECT_EQ(CheckTaskResult("memory.export", json::array()).code(), Code::kInvalidArgument);
  EXPECT_TRUE(CheckTaskResult("memory.export", json(nullptr)).ok()) << "a failure may carry no result";
  EXPECT_TRUE(CheckTaskResult("memory.export", json::object()).ok());
  EXPECT_TRUE(CheckTaskResult("test.a", {{"anything", 1}}).ok()) << "no message: the machine reads it";
}

// Every result the recorded runs hold (success and failure) matches the
// result message of its task's kind.
TEST(TaskSchema, EveryResultTheRecordedRunsHoldMatchesItsMessage) {
  int checked = 0;
  for (const char* name : kRecordedRuns) {
    std::map<std::string, std::string> kind_of;
    for (const auto& e : RecordedRunEvents(name)) {
      const json& p = e["payload"];
      if (e["type"] == ev::kTaskScheduled) kind_of[p["task_id"]] = p["kind"];
      if ((e["type"] != ev::kTaskSucceeded && e["type"] != ev::kTaskFailed) || !p.contains("result")) continue;
      const std::string kind = kind_of[p["task_id"]];
      const Status s = CheckTaskResult(kind, p["result"]);
      EXPECT_TRUE(s.ok()) << name << " " << p["task_id"] << ": " << s.message();
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace npuprof::sm::testing
