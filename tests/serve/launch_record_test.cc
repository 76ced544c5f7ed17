// The launch record read back from a target (workers/handlers/launch_record.h):
// what a first launch writes decodes to itself; bytes another process wrote
// are refused naming the file and the key (never a thrown exception in the
// handler); a number written as a string comes back a number, so the start
// scripts' builder can read every key without throwing.
#include <string>

#include <gtest/gtest.h>

#include "statemachine/task_schema.h"
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
  (*p.mutable_env())["HCCL_BUFFSIZE"] = "200";
  p.add_extra_args("--enforce-eager");
  json rec = LaunchRecordFromPayload(p, kRt, "/opt/env.sh");
  rec["devices"] = {0, 1};  // what the handler picks before it publishes
  rec["service_marker"] = "NPUPROF_SERVICE=r1/service-1";
  rec["argv"] = ServeArgv(rec);
  rec["device_selection"] = {{"free_devices", {0, 1, 2}},
                             {"busy_devices", {{{"device", 3}, {"used_mb", 61440}, {"pids", {4242}},
                                                {"reason", "61440 MB in use by pid 4242"}}}}};
  return rec;
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
