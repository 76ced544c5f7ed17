// Pure tests of statemachine/service_spec: validation of the common service
// fields (each error names the field and the fix) and the task payloads.
#include <gtest/gtest.h>

#include "run_specs.pb.h"
#include "statemachine/event_schema.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/message_json.h"
#include "statemachine/service_spec.h"

namespace npuprof::sm {
namespace {

json Base() {
  return json{{"machine_record", {{"name", "m"}, {"host", "h"}, {"user", "u"}, {"runtime_base", "/tmp/np"}}},
              {"model", "/models/m"}};
}

Status Check(json spec) { return ValidateServiceSpec(spec, "serve"); }

json With(const std::string& k, json v) {
  json s = Base();
  s[k] = std::move(v);
  return s;
}

void ExpectInvalid(const json& spec, const std::string& needle) {
  Status st = Check(spec);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << spec.dump();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(ServiceSpec, DefaultsAreFilled) {
  json s = Base();
  ASSERT_TRUE(ValidateServiceSpec(s, "serve").ok());
  EXPECT_EQ(s["tp"], 1);
  EXPECT_EQ(s["dp"], 1);
  EXPECT_EQ(s["devices"], nullptr);
  EXPECT_EQ(s["port"], nullptr);
  EXPECT_EQ(s["env"], json::object());
  EXPECT_EQ(s["extra_args"], json::array());
  EXPECT_EQ(s["wrap_script"], nullptr);
  EXPECT_EQ(s["health_timeout_s"], 300);
  EXPECT_EQ(s["stop_grace_s"], 10);
}

TEST(ServiceSpec, KindDefaultsApply) {
  json s = Base();
  ServiceDefaults d;
  d.port = 8901;
  ASSERT_TRUE(ValidateServiceSpec(s, "serve", d).ok());
  EXPECT_EQ(s["port"], 8901);
}

TEST(ServiceSpec, ModelMustBeAnAbsolutePath) {
  ExpectInvalid(json{{"machine_record", Base()["machine_record"]}}, "model is required");
  ExpectInvalid(With("model", "models/m"), "absolute path");
  ExpectInvalid(With("model", "/models/m\nrm -rf /"), "absolute path");
}

TEST(ServiceSpec, ParallelSizesAndDevices) {
  ExpectInvalid(With("tp", 0), "tp = 0");
  ExpectInvalid(With("dp", -1), "dp = -1");
  json s = With("devices", "2,3");
  s["tp"] = 2;
  ASSERT_TRUE(ValidateServiceSpec(s, "serve").ok());
  EXPECT_EQ(s["devices"], json({2, 3}));
  ExpectInvalid(With("devices", "0,1"), "tp*dp = 1");
  json dup = With("devices", json({1, 1}));
  dup["tp"] = 2;
  ExpectInvalid(dup, "twice");
  ExpectInvalid(With("devices", "0,x"), "--devices 0,1");
}

TEST(ServiceSpec, PortRange) {
  ExpectInvalid(With("port", 70000), "port");
  json s = With("port", 8000);
  ASSERT_TRUE(ValidateServiceSpec(s, "serve").ok());
  EXPECT_EQ(s["port"], 8000);
}

TEST(ServiceSpec, EnvNamesAreValidatedAndSecretsRefused) {
  ExpectInvalid(With("env", {{"1BAD", "x"}}), "env name '1BAD'");
  ExpectInvalid(With("env", {{"A-B", "x"}}), "env name 'A-B'");
  ExpectInvalid(With("env", {{"HF_TOKEN", "x"}}), "machine's env script");
  ExpectInvalid(With("env", {{"ASCEND_RT_VISIBLE_DEVICES", "0"}}), "--devices");
  ExpectInvalid(With("env", {{"A", "line\nbreak"}}), "one-line");
  json s = With("env", {{"HCCL_BUFFSIZE", 200}, {"X", "a b 'c'"}});
  ASSERT_TRUE(ValidateServiceSpec(s, "serve").ok());
  EXPECT_EQ(s["env"]["HCCL_BUFFSIZE"], "200");
}

TEST(ServiceSpec, ExtraArgsMayNotOverrideManagedFlags) {
  ExpectInvalid(With("extra_args", {"--port", "1"}), "use `npuprof submit serve --port`");
  ExpectInvalid(With("extra_args", {"--port=1"}), "use `npuprof submit serve --port`");
  ExpectInvalid(With("extra_args", {"-tp", "2"}), "use `npuprof submit serve --tp`");
  ExpectInvalid(With("extra_args", {"--served-model-name", "x"}), "--served-model-name");
  // --host is managed now: a spec field with its own option.
  ExpectInvalid(With("extra_args", {"--host", "0.0.0.0"}), "use `npuprof submit serve --host`");
  ExpectInvalid(With("extra_args", {"--data-parallel-start-rank", "1"}), "npuprof sets it itself");
  ExpectInvalid(With("extra_args", {"--data-parallel-size-local", "1"}), "use `npuprof submit serve --dp-local`");
  // serve adds nothing of its own: what torch-profile and memory-profile
  // manage is the user's to give here.
  json s = With("extra_args", {"--compilation-config", "{\"cudagraph_mode\": \"PIECEWISE\"}", "--enforce-eager",
                               "--max-model-len", "4096", "--gpu-memory-utilization=0.5"});
  EXPECT_TRUE(ValidateServiceSpec(s, "serve").ok());
  json m = With("extra_args", {"--max-model-len", "4096"});
  Status st = ValidateServiceSpec(m, "memory-profile");
  EXPECT_NE(st.message().find("use `npuprof submit memory-profile --max-model-len`"), std::string::npos)
      << st.message();
}

TEST(ServiceSpec, HostIsASpecFieldNpuprofCanReach) {
  json s = With("host", "0.0.0.0");
  ASSERT_TRUE(ValidateServiceSpec(s, "serve").ok());
  EXPECT_EQ(s["host"], "0.0.0.0");
  json d = Base();
  ASSERT_TRUE(ValidateServiceSpec(d, "serve").ok());
  EXPECT_TRUE(d["host"].is_null()) << "null: 127.0.0.1";
  ExpectInvalid(With("host", "10.0.0.5"), "npuprof reaches the service at 127.0.0.1");
  ExpectInvalid(With("host", 1), "host 1 is not allowed");
}

TEST(ServiceSpec, RuntimeDirDefaultsUnderTheHome) {
  EXPECT_EQ(ServiceRuntimeDir(json::object(), "r1", 1), "~/.cache/npuprof/runtime/r1/service-1");
  EXPECT_EQ(ServiceRuntimeDir(json{{"runtime_base", "~/rt/"}}, "r1", 2), "~/rt/r1/service-2");
}

TEST(ServiceSpec, WrapScriptNameAndTimeouts) {
  ExpectInvalid(With("wrap_script", "wrap.sh"), "wrap_script");
  ExpectInvalid(With("served_model_name", "-x"), "served_model_name");
  ExpectInvalid(With("served_model_name", "a b"), "served_model_name");
  EXPECT_TRUE(Check(With("served_model_name", "Qwen/Qwen2.5-7B")).ok());
  ExpectInvalid(With("health_timeout_s", 0), "health_timeout_s");
  ExpectInvalid(With("stop_grace_s", "x"), "stop_grace_s");
}

TEST(ServiceSpec, LaunchPayload) {
  json s = Base();
  s["served_model_name"] = "m";
  s["env"] = {{"A", "user"}};
  s["extra_args"] = {"--enforce-eager"};
  ASSERT_TRUE(ValidateServiceSpec(s, "serve").ok());
  s["machine"] = "m1";
  auto typed = DecodeRunSpec("serve", s);
  ASSERT_TRUE(typed.ok() && *typed) << typed.status().message();
  const tasks::ServiceLaunch launch =
      BuildLaunchPayload("r9", 2, dynamic_cast<const run_specs::ServeSpec&>(**typed), {"--max-model-len", "4096"},
                         json{{"A", "kind"}, {"B", "kind"}});
  json p = MessageToJson(launch);
  EXPECT_EQ(p["runtime_dir"], "/tmp/np/r9/service-2");
  EXPECT_EQ(p["extra_args"], json({"--max-model-len", "4096", "--enforce-eager"}));
  EXPECT_EQ(p["env"], json({{"A", "user"}, {"B", "kind"}}));
  // The machine is the run's: Decision::Schedule writes it (task_schema_test).
  EXPECT_FALSE(p.contains("machine"));
  results::ServiceLaunchResult launched;
  launched.set_pid(7);
  launched.mutable_port()->set_number_value(9000);
  json w = MessageToJson(BuildWaitReadyPayload(launch, launched, 1000));
  EXPECT_EQ(w["pid"], 7);
  EXPECT_EQ(w["port"], 9000);
  EXPECT_EQ(w["deadline_ms"], 1000 + 300 * 1000);
  EXPECT_EQ(w["served_model_name"], "m");
  EXPECT_EQ(w["runtime_dir"], "/tmp/np/r9/service-2") << "the payload's, when the result names none";
  launched.set_runtime_dir("/home/u/np/r9/service-2");
  launched.clear_pid();
  launched.mutable_port()->set_null_value({});
  w = MessageToJson(BuildWaitReadyPayload(launch, launched, 1000));
  EXPECT_EQ(w["runtime_dir"], "/home/u/np/r9/service-2") << "the result's absolute dir wins";
  EXPECT_FALSE(w.contains("pid")) << "no pid recorded: the handler reads <runtime_dir>/pid";
  EXPECT_FALSE(w.contains("port")) << "a port the launch did not record is not made up";
  // A launch payload stored without a health timeout or a served name (an
  // older npuprof's) waits the default 300 s for the model path.
  tasks::ServiceLaunch older = launch;
  older.set_health_timeout_s(0);
  older.clear_served_model_name();
  w = MessageToJson(BuildWaitReadyPayload(older, launched, 1000));
  EXPECT_EQ(w["deadline_ms"], 1000 + 300 * 1000);
  EXPECT_EQ(w["served_model_name"], "/models/m");
  json rec = ServiceRecordFromLaunch(p, json{{"pid", 7}, {"port", 9000}, {"devices", {0}}});
  EXPECT_EQ(rec["status"], "starting");
  EXPECT_EQ(rec["devices"], json({0}));
  EXPECT_EQ(rec["pid"], 7);
  EXPECT_EQ(rec["port"], 9000);
  for (const json& odd : {json("9000"), json(9000.5), json(true)}) {
    const json bad = ServiceRecordFromLaunch(p, json{{"pid", odd}, {"port", odd}});
    EXPECT_TRUE(bad["pid"].is_null() && bad["port"].is_null()) << odd << " is no pid or port: " << bad.dump();
    EXPECT_TRUE(CheckEventPayload("ServiceLaunched", bad, UnknownKeys::kReject).ok()) << bad.dump();
  }
  EXPECT_EQ(EffectiveServedName(Base()), "/models/m");
  // The message's rule is the JSON one: the served name, else the model path.
  EXPECT_EQ(EffectiveServedName(launch), "m");
  EXPECT_EQ(EffectiveServedName(older), "/models/m");
  EXPECT_EQ(EffectiveServedName(older), EffectiveServedName(MessageToJson(older)));
  EXPECT_EQ(EffectiveServedName(launch), EffectiveServedName(MessageToJson(launch)));
  EXPECT_EQ(ServiceRuntimeDir(json{{"runtime_base", "/a//"}}, "r", 1), "/a/r/service-1");
}

// Only a launch that failed for good and whose result says started=false
// started nothing; anything else may have left a process to stop.
TEST(ServiceSpec, ALaunchStartedNothingOnlyWhenItsFailureSaysSo) {
  TaskInfo launch;
  launch.kind = kServiceLaunchTask;
  launch.status = TaskStatus::kFailed;
  launch.result = {{"error_kind", "devices_unavailable"}, {"result", {{"started", false}}}};
  EXPECT_TRUE(LaunchStartedNothing(launch));
  launch.result["result"] = json::object();
  EXPECT_FALSE(LaunchStartedNothing(launch)) << "not said: a process may exist";
  launch.result.erase("result");
  EXPECT_FALSE(LaunchStartedNothing(launch)) << "no result kept";
  launch.result["result"] = {{"started", 0}};
  EXPECT_FALSE(LaunchStartedNothing(launch)) << "a result that cannot be read is not trusted to say nothing ran";
  launch.result["result"] = {{"started", false}};
  launch.status = TaskStatus::kSucceeded;
  EXPECT_FALSE(LaunchStartedNothing(launch)) << "a launch that succeeded started its service";
  launch.status = TaskStatus::kFailed;
  launch.kind = kServiceStopTask;
  EXPECT_FALSE(LaunchStartedNothing(launch)) << "only a launch starts a service";
}

}  // namespace
}  // namespace npuprof::sm
