// Every task's retry policy comes from one table (statemachine/task_policies.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "recorded_runs.h"
#include "sm_test_util.h"
#include "statemachine/serve_hbm_watch.h"
#include "statemachine/device_lease.h"
#include "statemachine/engine.h"
#include "statemachine/machine_check_machine.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/probe_machine.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/service_spec.h"
#include "statemachine/task_policies.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm::testing {
namespace {

TEST(TaskPolicies, OneEntryPerSchedulerAndTaskKindEachWithAReason) {
  const std::vector<std::string> kinds = DefaultKinds().Names();
  const std::set<std::string> task_kinds = {
      kProbeTask,         kMachineCheckTask,   kServiceLaunchTask, kServiceWaitReadyTask, kServiceStopTask,
      kTpPrepareImageTask, kTpControlTask,     kTpRequestsTask,    kTpListDirsTask,       kTpAnalyseRankTask,
      kTpWaitFlushTask,   kTpCaptureCheckTask, kMemPreflightTask,   kMemNpuSmiTask,     kMemLogsTask,          kMemInferTask,
      kMemExportTask,     kMemCollectTask,     kMemWeightsTask,    kMemWaitFlushTask, kMachineClockTask,
      kMemOperatorMemoryTask, kServiceHbmSampleTask};
  std::set<std::pair<std::string, std::string>> seen;
  for (const NamedTaskPolicy& p : TaskPolicies()) {
    const std::string who(p.scheduler), task(p.task_kind);
    EXPECT_TRUE(seen.emplace(who, task).second) << "twice: " << who << " " << task;
    EXPECT_TRUE(std::count(kinds.begin(), kinds.end(), who) || who == "device-lease" || who == "device-quarantine" ||
                who == "deployment")
        << who << " is neither a run kind nor a shared mechanism";
    EXPECT_TRUE(task_kinds.count(task)) << task << " is not a task kind";
    EXPECT_GE(p.policy.max_attempts, 1) << who << " " << task;
    EXPECT_GT(p.policy.lease_ms, 0) << who << " " << task;
    EXPECT_FALSE(p.what.empty()) << who << " " << task;
    EXPECT_TRUE(HasPolicy(who, task));
  }
  EXPECT_FALSE(HasPolicy("probe", kMemInferTask));
  EXPECT_EQ(PolicyFor("probe", "no.such_task").lease_ms, TaskPolicy{}.lease_ms) << "the documented default";
}

TEST(TaskPolicies, TheInferenceIsTriedOnceAndItsLeaseOutlastsItsTimeout) {
  // A second inference would measure a second request's activations.
  const TaskPolicy infer = PolicyFor("memory-profile", kMemInferTask);
  EXPECT_EQ(infer.max_attempts, 1);
  EXPECT_GT(infer.lease_ms, 600 * 1000);
  EXPECT_EQ(PolicyFor("device-quarantine", kProbeTask).max_attempts, 1);
}

TEST(TaskPolicies, AScheduledTaskCarriesItsTablePolicy) {
  Driver run("pol", DefaultKinds());
  run.Submit("probe", ProbeSpec(), 1000);
  ASSERT_FALSE(run.log().empty());
  const auto scheduled = std::find_if(run.log().begin(), run.log().end(),
                                      [](const proto::Event& e) { return e.type() == ev::kTaskScheduled; });
  ASSERT_NE(scheduled, run.log().end());
  const json policy = json::parse(scheduled->payload_json())["policy"];
  EXPECT_EQ(policy, TaskPolicyToJson(PolicyFor("probe", kProbeTask))) << policy.dump();
  EXPECT_EQ(policy["backoff_ms"], 500);
  EXPECT_EQ(policy["lease_ms"], 60000);
}

// The recorded runs (a memory-profile and a torch-profile with its device
// lease) were scheduled before the table existed: each of their tasks has a
// table row, with the policy it was given then.
TEST(TaskPolicies, TheRecordedRunsTasksHaveTheirRowsAndTheirPolicies) {
  int checked = 0;
  for (const char* name : testing_support::kRecordedRuns) {
    std::string run_kind;
    for (const auto& e : testing_support::RecordedRunEvents(name)) {
      if (e["type"] == ev::kRunSubmitted) run_kind = e["payload"]["kind"];
      if (e["type"] != ev::kTaskScheduled) continue;
      const json& p = e["payload"];
      const std::string purpose = p["payload"].value("purpose", "");
      const std::string who = purpose == kLeaseProbePurpose        ? "device-lease"
                              : purpose == kQuarantineProbePurpose ? "device-quarantine"
                                                                   : run_kind;
      const std::string task = p["kind"];
      EXPECT_TRUE(HasPolicy(who, task)) << name << ": " << who << " " << task;
      EXPECT_EQ(TaskPolicyToJson(PolicyFor(who, task)), p["policy"]) << name << ": " << who << " " << task;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

TEST(TaskPolicies, TheServeWatchLeaseCoversThreePolls) {
  EXPECT_EQ(ServeWatchPolicy(5).lease_ms, 30000);
  EXPECT_EQ(ServeWatchPolicy(20).lease_ms, 60000);
}

}  // namespace
}  // namespace npuprof::sm::testing
