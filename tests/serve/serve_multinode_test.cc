// Pure tests of a serve run over several machines: the deployment's spec,
// its gang lease, every node launched at once with the run's RPC port,
// readiness while every node is watched, a node that dies
// or never starts failing the run by name, and the stop reaching every node
// (every node at once), with a per-node quarantine when a stop fails.
#include <gtest/gtest.h>

#include <set>

#include "tests/support/kind_driver.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/deployment_service.h"
#include "statemachine/deployment_spec.h"
#include "statemachine/device_lease.h"
#include "statemachine/event_types.h"
#include "statemachine/serve_machine.h"
#include "statemachine/service_spec.h"

namespace npuprof::sm {
namespace {

using testing::KindDriver;

json Record(const std::string& name) {
  return json{{"name", name}, {"host", "10.0.0." + std::to_string(name[0] - 'a' + 1)}, {"user", "u"},
              {"runtime_base", "/rt"}};
}

// tp 4, dp 2 over machines a (head) and b, four NPUs each.
json TwoNodeSpec() {
  return json{{"machine", "a"},
              {"machine_record", Record("a")},
              {"model", "/models/big"},
              {"served_model_name", "big"},
              {"tp", 4},
              {"dp", 2},
              {"nodes",
               {{{"machine", "a"}, {"devices", "0,1,2,3"}, {"machine_record", Record("a")}},
                {{"machine", "b"}, {"devices", {4, 5, 6, 7}}, {"machine_record", Record("b")}}}}};
}

struct MultiServe : KindDriver {
  MultiServe() : KindDriver(std::make_unique<ServeMachine>()) {}
  // Up to ready: the head's launch, then b's, readiness on the head.
  void ToReady() {
    Submit(TwoNodeSpec());
    Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 100}, {"port", 8000},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", 23456}}}});
    Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 200}});
    Answer(kServiceWaitReadyTask, "a", true, {{"ready_after_ms", 5}, {"port", 8000}});
    AnswerClocks();
  }
  // Every pending machine.clock measure answered (a run ends only after them).
  void AnswerClocks() {
    while (const TaskInfo* t = Pending(kMachineClockTask, "a")) {
      const std::string when = t->payload.value("when", "start");
      Answer(kMachineClockTask, "a", true,
             {{"when", when},
              {"measured_at_ms", 5},
              {"offsets", {{{"machine", "a"}, {"offset_ms", 0.0}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}},
                           {{"machine", "b"}, {"offset_ms", 1.0}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}}}}});
    }
  }
};

TEST(ServeMultiNode, SpecIsCheckedAndFilledPerNode) {
  json spec = TwoNodeSpec();
  ASSERT_TRUE(ValidateServiceSpec(spec, "serve").ok());
  EXPECT_EQ(spec["dp_local"], 1);
  EXPECT_EQ(spec["nodes"][0]["devices"], json({0, 1, 2, 3}));
  EXPECT_EQ(spec["nodes"][0]["role"], "head");
  EXPECT_EQ(spec["nodes"][1]["role"], "headless");
  EXPECT_TRUE(spec["devices"].is_null());
  EXPECT_TRUE(spec["dp_address"].is_null());
  EXPECT_TRUE(IsMultiNodeSpec(spec));

  const auto refused = [](json s, const std::string& words) {
    const Status st = ValidateServiceSpec(s, "serve");
    EXPECT_FALSE(st.ok()) << words;
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  json twice = TwoNodeSpec();
  twice["nodes"][1]["machine"] = "a";
  refused(twice, "nodes[1].machine: machine 'a' is named twice");
  json unknown = TwoNodeSpec();
  unknown["nodes"][1].erase("machine_record");
  refused(unknown, "nodes[1].machine: machine 'b' is not in the inventory");
  json odd = TwoNodeSpec();
  odd["dp"] = 3;
  refused(odd, "dp = 3 over 2 nodes does not divide");
  json local = TwoNodeSpec();
  local["dp_local"] = 2;
  refused(local, "dp_local = 2 on each of 2 nodes makes 4 data-parallel ranks, but dp = 2");
  json short_devices = TwoNodeSpec();
  short_devices["nodes"][1]["devices"] = {4, 5};
  refused(short_devices, "nodes[1].devices lists 2 device(s) but tp*dp_local = 4");
  json both = TwoNodeSpec();
  both["devices"] = {0, 1};
  refused(both, "with several nodes give each node's devices");
  json head = TwoNodeSpec();
  head["machine"] = "b";
  refused(head, "machine 'b' is not nodes[0].machine 'a'");
  json alone = TwoNodeSpec();
  alone.erase("nodes");
  alone["dp_address"] = "10.1.1.1";
  refused(alone, "dp_address is for deployments over several nodes");

  // One node is the one-node form.
  json one = TwoNodeSpec();
  one["nodes"].erase(1);
  one["dp"] = 1;
  ASSERT_TRUE(ValidateServiceSpec(one, "serve").ok());
  EXPECT_FALSE(one.contains("nodes"));
  EXPECT_EQ(one["devices"], json({0, 1, 2, 3}));
}

TEST(ServeMultiNode, GangLeaseThenEveryNodeAtOnceWithTheRunsRpcPort) {
  MultiServe r;
  r.Submit(TwoNodeSpec(), /*lease=*/false);
  ASSERT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
  ASSERT_EQ(r.s.lease.legs.size(), 2u);
  EXPECT_EQ(r.s.lease.legs[1].machine, "b");
  EXPECT_EQ(r.s.lease.legs[1].devices, (DeviceIds{4, 5, 6, 7}));
  Input half;
  half.type = Input::Type::kLeaseGranted;
  half.legs = {{"a", {0, 1, 2, 3}}};
  EXPECT_FALSE(r.Try(half).ok()) << "a gang is granted whole";
  Input ids;
  ids.type = Input::Type::kLeaseGranted;
  ids.devices = {0, 1, 2, 3};
  EXPECT_FALSE(r.Try(ids).ok()) << "a multi-leg lease names each machine";
  while (auto next = testing::NextLeaseInput(r.s)) r.Do(*next);
  ASSERT_EQ(r.s.lease.phase, LeasePhase::kHeld);

  ASSERT_EQ(r.PendingAll(kServiceLaunchTask).size(), 2u) << "every node is launched at once";
  const TaskInfo* head = r.Pending(kServiceLaunchTask, "a");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->payload["runtime_dir"], "/rt/r1/service-1-node0");
  EXPECT_EQ(head->payload["devices"], json({0, 1, 2, 3}));
  EXPECT_EQ(head->payload["deployment"]["dp_address"], "10.0.0.1") << "the head's host when no cluster address";
  EXPECT_FALSE(head->payload["deployment"].value("headless", false));
  const int32_t rpc = head->payload["deployment"].value("dp_rpc_port", 0);
  EXPECT_GE(rpc, kRpcPortFirst);
  EXPECT_LE(rpc, kRpcPortLast);
  const TaskInfo* node1 = r.Pending(kServiceLaunchTask, "b");
  ASSERT_NE(node1, nullptr);
  EXPECT_EQ(node1->payload["machine"]["host"], "10.0.0.2");
  EXPECT_EQ(node1->payload["runtime_dir"], "/rt/r1/service-1-node1");
  EXPECT_EQ(node1->payload["devices"], json({4, 5, 6, 7}));
  EXPECT_EQ(node1->payload["deployment"]["dp_rpc_port"], rpc);
  EXPECT_EQ(node1->payload["deployment"]["dp_start_rank"], 1);
  EXPECT_TRUE(node1->payload["deployment"]["headless"].get<bool>());
  EXPECT_FALSE(node1->payload.contains("port")) << "no API server on a headless node";

  r.Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 100}, {"port", 8000},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", rpc}}}});
  EXPECT_EQ(r.s.state, "launching") << "until every node's launch answered";
  EXPECT_EQ(r.PendingAll(kServiceLaunchTask).size(), 1u) << "nothing launched twice";
  r.Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 200}});
  EXPECT_EQ(r.s.state, "waiting_ready");
  EXPECT_NE(r.Pending(kServiceWaitReadyTask, "a"), nullptr) << "ready: the head's API";
  EXPECT_NE(r.Pending(kServiceWatchTask, "b"), nullptr) << "every headless node is watched meanwhile";
  r.Answer(kServiceWaitReadyTask, "a", true, {{"ready_after_ms", 5}, {"port", 8000}});
  EXPECT_EQ(r.s.state, "ready");
  ASSERT_TRUE(r.s.data["nodes"].is_array());
  EXPECT_EQ(r.s.data["nodes"][0]["machine"], "b");
  EXPECT_EQ(r.s.data["nodes"][0]["status"], "ready");
}

TEST(ServeMultiNode, StopReachesEveryNodeAtOnce) {
  MultiServe r;
  r.ToReady();
  Input stop;
  stop.type = Input::Type::kSignal;
  stop.signal = "stop";
  stop.result = {{"force", false}};
  r.Do(stop);
  r.AnswerClocks();
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_NE(r.Pending(kServiceStopTask, "b"), nullptr);
  EXPECT_NE(r.Pending(kServiceStopTask, "a"), nullptr) << "no node waits for another to stop";
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  EXPECT_EQ(r.s.status, RunStatus::kOk);
  const NewEvent& released = r.all[r.all.size() - 3];
  ASSERT_EQ(released.type, kDevicesReleased);
  ASSERT_EQ(released.payload["legs"].size(), 2u);
  EXPECT_FALSE(released.payload["legs"][0].contains("quarantine"));
  EXPECT_FALSE(released.payload["legs"][1].contains("quarantine"));
}

TEST(ServeMultiNode, ANodeThatDiesFailsTheRunByNameAndEveryNodeIsStopped) {
  MultiServe r;
  r.ToReady();
  r.Answer(kServiceWatchTask, "b", false, {{"stderr_tail", "engine lost"}}, "service_died");
  r.AnswerClocks();
  EXPECT_EQ(r.s.state, "stopping");
  EXPECT_EQ(r.s.data["failure"]["machine"], "b");
  EXPECT_EQ(r.s.data["failure"]["node"], 1);
  r.Answer(kServiceStopTask, "b", true, {{"already_gone", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b)"), std::string::npos) << r.s.error;
}

TEST(ServeMultiNode, AHeadlessLaunchThatStartedNothingStopsTheHeadOnly) {
  MultiServe r;
  r.Submit(TwoNodeSpec());
  r.Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 100}, {"port", 8000},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", 23456}}}});
  r.Answer(kServiceLaunchTask, "b", false, {{"started", false}}, "unsafe_runtime_dir");
  r.AnswerClocks();
  EXPECT_EQ(r.Pending(kServiceStopTask, "b"), nullptr) << "nothing was started on b";
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b)"), std::string::npos) << r.s.error;
}

TEST(ServeMultiNode, AForcedStopThatFailsQuarantinesThatNodeOnly) {
  MultiServe r;
  r.ToReady();
  Input stop;
  stop.type = Input::Type::kSignal;
  stop.signal = "stop";
  stop.result = {{"force", false}};
  r.Do(stop);
  r.AnswerClocks();
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  r.Answer(kServiceStopTask, "a", false, json::object(), "unreachable");
  ASSERT_NE(r.Pending(kServiceStopTask, "a"), nullptr) << "an unforced stop that failed is tried with force";
  EXPECT_TRUE(r.Pending(kServiceStopTask, "a")->payload["force"].get<bool>());
  r.Answer(kServiceStopTask, "a", false, json::object(), "unreachable");
  ASSERT_TRUE(r.s.terminal);
  const NewEvent* released = nullptr;
  for (const auto& e : r.all)
    if (e.type == kDevicesReleased) released = &e;
  ASSERT_NE(released, nullptr);
  EXPECT_TRUE(released->payload["legs"][0].contains("quarantine")) << released->payload.dump();
  EXPECT_FALSE(released->payload["legs"][1].contains("quarantine")) << released->payload.dump();
}

TEST(ServeMultiNode, TheRunsRpcPortIsFixedByItsKeyAndStaysBelowTheEphemeralRange) {
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "r" + std::to_string(i) + "@u@10.0.0.1:22";
    const int32_t p = RunRpcPort(key);
    EXPECT_EQ(p, RunRpcPort(key)) << "the same run tells its nodes the same port, after a crash too";
    EXPECT_GE(p, kRpcPortFirst);
    EXPECT_LE(p, kRpcPortLast);
    EXPECT_TRUE(p < 29500 || p > 29599) << "clear of the torch and vLLM defaults";
    seen.insert(p);
  }
  EXPECT_GT(seen.size(), 190u) << "runs spread over the range";
  EXPECT_NE(RunRpcPort("r1@u@10.0.0.1:22"), RunRpcPort("r1@u@10.0.0.1:2222")) << "the head's endpoint is part of the key";
}

TEST(ServeMultiNode, TheSpecsRpcPortIsEveryNodesAndAHeadlessAnswerFirstWaitsForTheHead) {
  MultiServe r;
  json spec = TwoNodeSpec();
  spec["dp_rpc_port"] = 24680;
  r.Submit(spec);
  ASSERT_EQ(r.PendingAll(kServiceLaunchTask).size(), 2u);
  EXPECT_EQ(r.Pending(kServiceLaunchTask, "a")->payload["deployment"]["dp_rpc_port"], 24680);
  EXPECT_EQ(r.Pending(kServiceLaunchTask, "b")->payload["deployment"]["dp_rpc_port"], 24680);
  r.Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 200}});
  EXPECT_EQ(r.s.state, "launching");
  EXPECT_EQ(r.Pending(kServiceWaitReadyTask, "a"), nullptr) << "the head has not answered";
  r.Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 100}, {"port", 8000},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", 24680}}}});
  EXPECT_EQ(r.s.state, "waiting_ready");
  EXPECT_EQ(r.PendingAll(kServiceWaitReadyTask).size(), 1u);
  EXPECT_EQ(r.PendingAll(kServiceLaunchTask).size(), 0u);
}

TEST(ServeMultiNode, AHeadWhoseRpcPortIsTakenStartsNothingAndTheOtherNodesAreStopped) {
  MultiServe r;
  r.Submit(TwoNodeSpec());
  r.Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 200}});
  r.Answer(kServiceLaunchTask, "a", false, {{"started", false}}, "port_unavailable");
  r.AnswerClocks();
  EXPECT_EQ(r.Pending(kServiceStopTask, "a"), nullptr) << "nothing was started on the head";
  ASSERT_NE(r.Pending(kServiceStopTask, "b"), nullptr) << "what started on b is stopped";
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("port_unavailable"), std::string::npos) << r.s.error;
}

}  // namespace
}  // namespace npuprof::sm
