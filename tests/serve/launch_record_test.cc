// The launch record read back from a target (workers/handlers/launch_record.h):
// what a first launch writes decodes to itself; bytes another process wrote
// are refused naming the file and the key (never a thrown exception in the
// handler); a number written as a string comes back a number, so the start
// scripts' builder can read every key without throwing.
#include <string>

#include <gtest/gtest.h>

#include "statemachine/task_schema.h"
#include "common/status.h"
#include "task_payloads.pb.h"
#include "workers/handlers/launch_record.h"
#include "workers/handlers/service_scripts.h"

namespace npuprof::workers::service {
namespace {

using json = nlohmann::json;

const std::string kRt = "/home/u/np/r1/service-1";

json Published() {
  tasks::ServiceLaunch p;
  p.set_run_id("r1");
  p.set_launch_no(1);
  p.set_model("/models/m");
  p.set_tp(2);
  p.set_port(18001);
  p.add_devices(0);
  p.add_devices(1);
  (*p.mutable_env())["HCCL_BUFFSIZE"] = "200";
  p.add_extra_args("--enforce-eager");
  json rec = LaunchRecordFromPayload(p, kRt, "/opt/env.sh").value();
  rec["service_marker"] = "NPUPROF_SERVICE=r1/service-1";
  rec["argv"] = ServeArgv(rec);
  // A record written before leases also says how its launch picked devices.
  rec["device_selection"] = {{"free_devices", {0, 1, 2}},
                             {"busy_devices", {{{"device", 3}, {"used_mb", 61440}, {"pids", {4242}},
                                                {"reason", "61440 MB in use by pid 4242"}}}}};
  return rec;
}

tasks::ServiceLaunch LeasedPayload(std::vector<int32_t> devices) {
  tasks::ServiceLaunch p;
  p.set_run_id("r1");
  p.set_model("/models/m");
  for (int32_t d : devices) p.add_devices(d);
  return p;
}

// The launch runs on the run's leased devices and picks none of its own.
TEST(LaunchRecord, ALaunchUsesTheLeasedDevicesOnly) {
  auto none = LaunchRecordFromPayload(LeasedPayload({}), kRt, "");
  ASSERT_FALSE(none.ok()) << "no leased devices: refused, not picked from npu-smi";
  EXPECT_NE(none.status().message().find("picks none of its own"), std::string::npos) << none.status().message();
  auto leased = LaunchRecordFromPayload(LeasedPayload({4, 5}), kRt, "");
  ASSERT_TRUE(leased.ok());
  EXPECT_EQ((*leased)["devices"], json({4, 5}));
  // A record in force (another attempt's, read back) must name the lease.
  auto read = DecodeLaunchRecord(kRt, Published().dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE(CheckRecordDevices(*read, LeasedPayload({0, 1}), kRt).ok());
  const Status other = CheckRecordDevices(*read, LeasedPayload({4, 5}), kRt);
  EXPECT_EQ(other.code(), Code::kCorruption);
  EXPECT_NE(other.message().find(kRt + "/launch.json names devices [0,1] but the run leased [4,5]"),
            std::string::npos)
      << other.message();
}

// What _serve.sh runs is the record's argv: the argv the launch reports.
TEST(LaunchRecord, TheScriptRunsTheArgvTheRecordHolds) {
  json rec = Published();
  rec["runtime_dir"] = kRt;
  EXPECT_EQ(ArgvToRun(rec), ServeArgv(rec));
  rec["argv"] = {"vllm", "serve", "/models/m", "--gpu-memory-utilization", "0.5"};
  EXPECT_EQ(ArgvToRun(rec), rec["argv"].get<std::vector<std::string>>());
  auto script = ServeScript(rec);
  ASSERT_TRUE(script.ok());
  EXPECT_NE(script->find("vllm serve /models/m --gpu-memory-utilization 0.5"), std::string::npos) << *script;
  rec.erase("argv");
  EXPECT_EQ(ArgvToRun(rec), ServeArgv(rec)) << "a record without an argv runs what its fields give";
}

TEST(LaunchRecord, WhatALaunchPublishesReadsBackAsItWasWritten) {
  const json rec = Published();
  auto read = DecodeLaunchRecord(kRt, rec.dump(2) + "\n");
  ASSERT_TRUE(read.ok()) << read.status().message();
  for (const char* key : {"run_id", "launch_no", "runtime_dir", "model", "tp", "dp", "devices", "port", "env",
                          "extra_args", "env_script", "busy_threshold_mb", "service_marker", "argv",
                          "device_selection"})
    EXPECT_EQ((*read)[key], rec[key]) << key;
  EXPECT_FALSE(read->contains("served_model_name")) << "null: not given";
  EXPECT_FALSE(read->contains("wrap_script")) << "null: not wrapped";
  EXPECT_EQ(ServeArgv(*read), ServeArgv(rec)) << "the scripts built from the read record are the written ones";
  // What the launch answers from the record still fits its result message
  // (the device selection's integers stay integers through the Struct).
  const json answer = {{"runtime_dir", kRt}, {"pid", 7}, {"port", (*read)["port"]}, {"devices", (*read)["devices"]},
                       {"serve_argv", (*read)["argv"]}, {"device_selection", (*read)["device_selection"]}};
  EXPECT_TRUE(sm::CheckTaskResult("service.launch", answer).ok()) << sm::CheckTaskResult("service.launch", answer).message();
  EXPECT_TRUE((*read)["device_selection"]["busy_devices"][0]["used_mb"].is_number_integer());
  EXPECT_TRUE(ServeScript(*read).ok());
}

TEST(LaunchRecord, AValueOfTheWrongTypeIsRefusedNamingTheFileAndTheKey) {
  for (const auto& [key, bad] : std::vector<std::pair<std::string, json>>{
           {"devices", json({"zero"})}, {"tp", json("two")}, {"port", json(true)},
           {"extra_args", json({1})}, {"env", json({{"A", 1}})}, {"launch_no", json({{"n", 1}})}}) {
    json rec = Published();
    rec[key] = bad;
    auto read = DecodeLaunchRecord(kRt, rec.dump());
    ASSERT_FALSE(read.ok()) << key << " = " << bad.dump();
    EXPECT_EQ(read.status().code(), Code::kCorruption);
    const std::string& why = read.status().message();
    EXPECT_NE(why.find(kRt + "/launch.json"), std::string::npos) << why;
    EXPECT_NE(why.find(key), std::string::npos) << why;
    EXPECT_NE(why.find("submit a new run"), std::string::npos) << "says what to do: " << why;
  }
}

TEST(LaunchRecord, BytesThatAreNoRecordAreRefusedNotThrown) {
  for (const std::string& bytes :
       {std::string(), std::string("[1,2]"), std::string("{\"model\": \"/m\""), std::string("\xff\xfe{}", 4),
        std::string("{\"model\": \"\xc3\x28\"}"), std::string(kMaxLaunchRecordBytes + 1, ' ')}) {
    auto read = DecodeLaunchRecord(kRt, bytes);
    ASSERT_FALSE(read.ok()) << bytes.substr(0, 40);
    EXPECT_EQ(read.status().code(), Code::kCorruption) << read.status().message();
  }
}

TEST(LaunchRecord, ANumberWrittenAsTextComesBackANumberAndUnknownKeysAreDropped) {
  json rec = Published();
  rec["port"] = "18001";
  rec["devices"] = {"0", "1"};
  rec["written_by_a_newer_npuprof"] = {{"x", 1}};
  auto read = DecodeLaunchRecord(kRt, rec.dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ((*read)["port"], 18001);
  EXPECT_EQ((*read)["devices"], json({0, 1}));
  EXPECT_FALSE(read->contains("written_by_a_newer_npuprof"));
  EXPECT_TRUE(ServeScript(*read).ok()) << "the builder reads every key without throwing";
}

}  // namespace
}  // namespace npuprof::workers::service
