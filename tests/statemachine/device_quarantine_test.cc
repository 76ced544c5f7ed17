// Quarantine in the pure engine: a release carries `quarantine` exactly when
// the run's service may still be running; a waiting run asked to check
// quarantined devices probes them once and records what it saw.
#include <gtest/gtest.h>

#include "statemachine/device_lease.h"
#include "statemachine/engine.h"
#include "statemachine/event_types.h"
#include "statemachine/probe_machine.h"
#include "statemachine/replay_verifier.h"
#include "tests/statemachine/lease_run.h"

namespace npuprof::sm {
namespace {

using lease_test::LeaseRun;
using lease_test::ServeSpec;
using lease_test::StableHash;

// A serve run on devices 0,1, waiting for its lease.
void Waiting(LeaseRun& r) {
  r.Submit(ServeSpec({0, 1}));
  ASSERT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
}

Status Check(LeaseRun& r, DeviceIds devices) {
  Input check;
  check.type = Input::Type::kCheckDevices;
  check.devices = std::move(devices);
  auto fed = r.Feed(check);
  return fed.ok() ? Status::Ok() : fed.status();
}

// A serve run granted devices 0,1 and launched (pid 4242, ready).
void Launched(LeaseRun& r) {
  Waiting(r);
  ASSERT_TRUE(r.Grant({0, 1}).ok());
  r.Answer("service.launch", true, {{"pid", 4242}, {"started", true}, {"port", 8000}});
  r.Answer("service.wait_ready", true, {{"ready_after_ms", 40}, {"rounds", 2}, {"seen_by", "log"}});
}

void Cancel(LeaseRun& r) {
  Input c;
  c.type = Input::Type::kCancel;
  ASSERT_TRUE(r.Feed(c).ok());
}

TEST(DeviceQuarantine, AStopThatFailedQuarantinesTheReleasedDevices) {
  LeaseRun r;
  Launched(r);
  Cancel(r);
  // Every stop attempt fails (target unreachable); the run ends without knowing.
  for (int i = 0; i < 10 && !r.s.terminal; ++i) {
    r.Answer("service.stop", false, nullptr, "unreachable", /*retryable=*/false);
    for (const auto& [id, t] : std::map<std::string, TimerInfo>(r.s.timers)) {
      if (!t.armed) continue;
      Input f;
      f.type = Input::Type::kTimerFired;
      f.timer_id = id;
      ASSERT_TRUE(r.Feed(f).ok());
    }
  }
  ASSERT_TRUE(r.s.terminal) << r.s.state;
  const json rel = r.PayloadOf(kDevicesReleased);
  ASSERT_TRUE(rel.is_object());
  EXPECT_EQ(rel["devices"], json({0, 1}));
  ASSERT_TRUE(rel.contains("quarantine")) << rel.dump();
  EXPECT_NE(rel["quarantine"].get<std::string>().find("service.stop failed: unreachable"), std::string::npos)
      << rel.dump();
  const VerifyResult vr = VerifyRunEvents(DefaultKinds(), r.log, StableHash);
  EXPECT_TRUE(vr.ok) << vr.first_divergence;
}

TEST(DeviceQuarantine, AConfirmedStopReleasesWithoutQuarantine) {
  LeaseRun r;
  Launched(r);
  Cancel(r);
  r.Answer("service.stop", true, {{"stopped", true}, {"already_gone", false}});
  ASSERT_TRUE(r.s.terminal) << r.s.state;
  const json rel = r.PayloadOf(kDevicesReleased);
  ASSERT_TRUE(rel.is_object());
  EXPECT_FALSE(rel.contains("quarantine")) << rel.dump();
}

TEST(DeviceQuarantine, ServiceMayStillRunReadsTheLaunchAndTheLastStop) {
  RunState s;
  EXPECT_EQ(ServiceMayStillRun(s), "") << "no launch: nothing can run";
  TaskInfo launch;
  launch.task_id = "r.t1";
  launch.kind = "service.launch";
  launch.status = TaskStatus::kFailed;
  launch.result = {{"result", {{"started", false}}}};
  s.tasks["r.t1"] = launch;
  EXPECT_EQ(ServiceMayStillRun(s), "") << "a launch that never started anything";
  s.tasks["r.t1"].result = {{"error_kind", "timeout"}};
  EXPECT_NE(ServiceMayStillRun(s), "") << "a launch that may have started, never stopped";
  TaskInfo stop;
  stop.task_id = "r.t2";
  stop.kind = "service.stop";
  stop.status = TaskStatus::kSucceeded;
  stop.result = {{"result", {{"stopped", false}}}};
  s.tasks["r.t2"] = stop;
  EXPECT_NE(ServiceMayStillRun(s), "");
  TaskInfo later = stop;
  later.task_id = "r.t10";  // numbered after t2 (not "r.t10" < "r.t2" as text)
  later.result = {{"result", {{"stopped", true}}}};
  s.tasks["r.t10"] = later;
  EXPECT_EQ(ServiceMayStillRun(s), "");
}

TEST(DeviceQuarantine, AWaitingRunProbesQuarantinedDevicesOnceAndRecordsWhatItSaw) {
  LeaseRun r;
  Waiting(r);
  ASSERT_TRUE(Check(r, {0, 1}).ok());
  ASSERT_TRUE(Check(r, {0, 1}).ok());  // a second ask while the probe is out adds nothing
  int probes = 0;
  for (const auto& [id, t] : r.s.tasks) probes += IsQuarantineProbe(t) && t.in_flight();
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kWaiting) << "the check does not touch the lease";
  r.Answer(kProbeTask, true,
           {{"free_devices", {1, 2}},
            {"busy_devices", {{{"logical_id", 0}, {"reason", "process listed on NPU 0 chip 0 (pid 4242)"}}}}});
  const json seen = r.PayloadOf(kDevicesChecked);
  ASSERT_TRUE(seen.is_object());
  EXPECT_EQ(seen["idle"], json({1}));
  ASSERT_EQ(seen["busy"].size(), 1u);
  EXPECT_EQ(seen["busy"][0]["device"], 0);
  EXPECT_NE(seen["busy"][0]["reason"].get<std::string>().find("pid 4242"), std::string::npos);
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
  EXPECT_FALSE(r.s.terminal);
  EXPECT_TRUE(VerifyRunEvents(DefaultKinds(), r.log, StableHash).ok);
}

TEST(DeviceQuarantine, AFailedProbeIsRecordedAndTheRunKeepsWaiting) {
  LeaseRun r;
  Waiting(r);
  ASSERT_TRUE(Check(r, {0}).ok());
  r.Answer(kProbeTask, false, nullptr, "npu_smi_failed");
  const json seen = r.PayloadOf(kDevicesChecked);
  ASSERT_TRUE(seen.is_object());
  EXPECT_TRUE(seen["idle"].empty());
  EXPECT_NE(seen.value("error", "").find("npu_smi_failed"), std::string::npos);
  EXPECT_FALSE(r.s.terminal);
  EXPECT_EQ(r.s.lease.phase, LeasePhase::kWaiting);
}

TEST(DeviceQuarantine, ACheckForARunThatIsNotWaitingDoesNothing) {
  LeaseRun r;
  Launched(r);
  const size_t before = r.log.size();
  ASSERT_TRUE(Check(r, {0}).ok());
  EXPECT_EQ(r.log.size(), before);
}

}  // namespace
}  // namespace npuprof::sm
