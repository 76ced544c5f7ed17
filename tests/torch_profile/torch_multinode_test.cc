// Pure tests of a torch-profile run over two machines: every node launched
// at once with the run's RPC port, the profile window through
// the head, one flush wait and one listing per node on that node, analyses
// where the ranks were written, the gates over the whole deployment (a
// rank_count_mismatch names the node), the clocks, and a node lost during
// the workload failing the run by name after every node is stopped.
#include <gtest/gtest.h>

#include "tests/support/kind_driver.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/service_spec.h"
#include "statemachine/torch_profile_machine.h"
#include "statemachine/torch_profile_manifest.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {
namespace {

using testing::KindDriver;

json Record(const std::string& name, const std::string& host) {
  return json{{"name", name}, {"host", host}, {"port", 22}, {"user", "u"}, {"runtime_base", "/rt"}};
}

// tp 1, dp 2 over a (head) and b: one rank per node.
json Spec() {
  return json{{"machine", "a"},
              {"machine_record", Record("a", "127.0.0.2")},
              {"model", "/models/qwen"},
              {"served_model_name", "qwen"},
              {"tp", 1},
              {"dp", 2},
              {"tag", "mn"},
              {"mode", "enforce_eager"},
              {"request_kind", "text"},
              {"benchmark_output_tokens", 8},
              {"nodes",
               {{{"machine", "a"}, {"machine_record", Record("a", "127.0.0.2")}},
                {{"machine", "b"}, {"machine_record", Record("b", "127.0.0.3")}}}}};
}

json RankOk(const std::string& dir) {
  return {{"path", dir},
          {"outputs", {{"kernel_details_csv", {{"path", dir + "/k"}, {"exists", true}}},
                       {"trace_view_json", {{"path", dir + "/t"}, {"exists", true}}}}},
          {"analysis_status", "ok"}};
}

struct MultiTorch : KindDriver {
  MultiTorch() : KindDriver(std::make_unique<TorchProfileMachine>()) {}
  void Role(const std::string& kind, const std::string& role, json result) {
    for (const TaskInfo* t : PendingAll(kind))
      if (t->payload.value("role", "") == role) {
        Input in;
        in.type = Input::Type::kTaskResult;
        in.task_id = t->task_id;
        in.attempt = t->attempt;
        in.ok = true;
        in.result = std::move(result);
        Do(in);
        return;
      }
    ADD_FAILURE() << "no pending " << kind << " " << role;
  }
  void ToReady() {
    Submit(Spec());
    Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 10}, {"port", 18000},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", 29500}}}});
    Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 20}});
    Answer(kServiceWaitReadyTask, "a", true, {{"ready_after_ms", 10}});
  }
  static json StartOffsets() {
    return {{"when", "start"},
            {"measured_at_ms", 5},
            {"offsets", {{{"machine", "a"}, {"offset_ms", 0.1}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}},
                         {{"machine", "b"}, {"offset_ms", 3200.0}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}}}}};
  }
  // Ready, the start clock measure answered (measured, or failed), the profile window open.
  void ToWorkload(bool clock_ok = true) {
    ToReady();
    if (clock_ok) Answer(kMachineClockTask, "a", true, StartOffsets());
    else Answer(kMachineClockTask, "a", false, json::object(), "timeout");
    Role(kTpControlTask, "start_profile", {{"ok", true}, {"status", 200}});
  }
  // From the workload to the listings: a one-request wave, the profile
  // stopped, the head's flush seen, the second node's flush ending with
  // `b_flush`, both services stopped.
  void ToListing(const std::string& b_flush) {
    Role(kTpRequestsTask, "wave", {{"results", json::array({{{"ok", true}}})}});
    Role(kTpRequestsTask, "followup", {{"results", json::array({{{"ok", true}}})}});
    Role(kTpControlTask, "stop_profile", {{"ok", true}, {"status", 200}});
    Answer(kTpWaitFlushTask, "a", true, {{"signal", "profiler_info"}});
    Answer(kTpWaitFlushTask, "b", true, {{"signal", b_flush}});
    Answer(kServiceStopTask, "b", true, {{"stopped", true}});
    Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  }
};

TEST(TorchMultiNode, EveryNodeFlushesAndIsAnalysedWhereItsRanksAreAndTheGateCountsTheDeployment) {
  MultiTorch r;
  r.ToReady();
  ASSERT_EQ(r.s.state, "ready");
  ASSERT_NE(r.Pending(kMachineClockTask, "a"), nullptr) << "the clocks are measured at the start";
  EXPECT_EQ(r.Pending(kMachineClockTask, "a")->payload["machines"].size(), 2u);
  EXPECT_TRUE(r.PendingAll(kTpControlTask).empty())
      << "the profile window waits for the start measure: no decision while the workload runs";
  r.Answer(kMachineClockTask, "a", true, MultiTorch::StartOffsets());
  EXPECT_DOUBLE_EQ(ClockOffsetMs(r.s, "b"), 3200.0);
  ASSERT_EQ(r.s.state, "profiling");
  r.Role(kTpControlTask, "start_profile", {{"ok", true}, {"status", 200}});
  ASSERT_EQ(r.s.state, "workload");
  EXPECT_NE(r.Pending(kServiceWatchTask, "b"), nullptr) << "the headless node is watched";
  r.Role(kTpRequestsTask, "wave", {{"results", json::array({{{"ok", true}}, {{"ok", true}}})}});
  r.Role(kTpRequestsTask, "followup", {{"results", json::array({{{"ok", true}}})}});
  r.Role(kTpControlTask, "stop_profile", {{"ok", true}, {"status", 200}});
  ASSERT_EQ(r.s.state, "flush");
  const TaskInfo* wait_b = r.Pending(kTpWaitFlushTask, "b");
  ASSERT_NE(wait_b, nullptr) << "every node waits for its own ranks";
  EXPECT_EQ(wait_b->payload["profile_root"], "/rt/r1/service-1-node1/vllm_profile");
  EXPECT_EQ(wait_b->payload["expected_ranks"], 1);
  r.Answer(kTpWaitFlushTask, "a", true, {{"signal", "profiler_info"}, {"waited_ms", 100}});
  EXPECT_EQ(r.s.state, "flush") << "until every node's flush ended";
  r.Answer(kTpWaitFlushTask, "b", true, {{"signal", "profiler_info"}, {"waited_ms", 300}});
  ASSERT_EQ(r.s.state, "stopping_service");
  EXPECT_EQ(r.s.data["flush"]["waited_ms"], 300);
  EXPECT_EQ(r.s.data["flush"]["nodes"][1]["machine"], "b");
  EXPECT_EQ(r.Pending(kServiceWatchTask, "b"), nullptr) << "the watch ends before the stop";
  EXPECT_NE(r.Pending(kServiceStopTask, "a"), nullptr) << "every node is stopped at once";
  EXPECT_NE(r.Pending(kServiceStopTask, "b"), nullptr) << "every node is stopped at once";
  const TaskInfo* end_clock = r.Pending(kMachineClockTask, "a");
  ASSERT_NE(end_clock, nullptr) << "the end clock measure goes with the stops, once the profile window closed";
  EXPECT_EQ(end_clock->payload["when"], "end");
  EXPECT_EQ(end_clock->payload["machines"].size(), 2u);
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  ASSERT_EQ(r.s.state, "analysing");
  const TaskInfo* list_b = r.Pending(kTpListDirsTask, "b");
  ASSERT_NE(list_b, nullptr);
  EXPECT_EQ(list_b->payload["profile_root"], "/rt/r1/service-1-node1/vllm_profile");
  r.Answer(kTpListDirsTask, "a", true, {{"dirs", {"/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"}}});
  r.Answer(kTpListDirsTask, "b", true, {{"dirs", {"/rt/r1/service-1-node1/vllm_profile/b_2_ascend_pt"}}});
  ASSERT_NE(r.Pending(kTpAnalyseRankTask, "b"), nullptr) << "a rank is analysed where it was written";
  r.Answer(kTpAnalyseRankTask, "a", true, RankOk("/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"));
  r.Answer(kTpAnalyseRankTask, "b", true, RankOk("/rt/r1/service-1-node1/vllm_profile/b_2_ascend_pt"));
  // The end clock measure, scheduled with the flush, answers before the run ends.
  EXPECT_FALSE(r.s.terminal) << "the run ends after its end clock measure";
  ASSERT_NE(r.Pending(kMachineClockTask, "a"), nullptr);
  r.Answer(kMachineClockTask, "a", true,
           {{"when", "end"},
            {"measured_at_ms", 9},
            {"offsets", {{{"machine", "a"}, {"offset_ms", 0.1}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}},
                         {{"machine", "b"}, {"offset_ms", 3200.2}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}}}}});
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kOk) << r.s.error;
  const json m = TorchProfileManifest(r.s);
  EXPECT_EQ(m["rank_count"], 2);
  EXPECT_EQ(m["expected_ranks"], 2);
  EXPECT_EQ(m["remote_profile_dirs"][1]["machine"], "b");
  EXPECT_EQ(m["remote_profile_roots"][1]["root"], "/rt/r1/service-1-node1/vllm_profile");
  EXPECT_EQ(m["nodes"][1]["machine"], "b");
  EXPECT_EQ(m["clock_offsets"]["start"]["offsets"][1]["offset_ms"], 3200.0);
}

TEST(TorchMultiNode, AStartMeasureDoneBeforeReadinessOpensTheWindowAtOnceAndACancelWhileWaitingStopsEveryNode) {
  MultiTorch early;
  early.Submit(Spec());
  early.Answer(kServiceLaunchTask, "a", true,
               {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 10}, {"port", 18000},
                {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", 29500}}}});
  early.Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 20}});
  early.Answer(kMachineClockTask, "a", true, MultiTorch::StartOffsets());
  EXPECT_EQ(early.s.state, "launching");
  early.Answer(kServiceWaitReadyTask, "a", true, {{"ready_after_ms", 10}});
  EXPECT_EQ(early.s.state, "profiling");
  EXPECT_EQ(early.PendingAll(kTpControlTask).size(), 1u);

  MultiTorch cancelled;
  cancelled.ToReady();
  ASSERT_EQ(cancelled.s.state, "ready");
  cancelled.Cancel();
  EXPECT_EQ(cancelled.s.state, "stopping_service");
  EXPECT_EQ(cancelled.Pending(kMachineClockTask, "a"), nullptr) << "the measure is abandoned";
  EXPECT_TRUE(cancelled.PendingAll(kTpControlTask).empty()) << "no profile window opens";
  cancelled.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  cancelled.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  ASSERT_TRUE(cancelled.s.terminal);
  EXPECT_EQ(cancelled.s.status, RunStatus::kCancelled);
}

TEST(TorchMultiNode, TheAnalyseLimitsAreInNodeOrderWhicheverListingAnswersFirst) {
  MultiTorch r;
  r.ToWorkload();
  r.ToListing("profiler_info");
  // The second node's listing answers first (a recovered run may see the other order).
  r.Answer(kTpListDirsTask, "b", true, {{"dirs", {"/rt/r1/service-1-node1/vllm_profile/b_2_ascend_pt"}}});
  r.Answer(kTpListDirsTask, "a", true, {{"dirs", {"/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"}}});
  const json limits = r.s.data.value("analyse_limits", json::array());
  ASSERT_EQ(limits.size(), 2u) << limits.dump();
  EXPECT_EQ(limits[0]["machine"], "a") << limits.dump();
  EXPECT_EQ(limits[1]["machine"], "b") << limits.dump();
}

TEST(TorchMultiNode, AFinalisedDeploymentIsListedAndAnalysedWhileItStopsAndTheHeadStaysFirst) {
  MultiTorch r;
  r.ToWorkload();
  r.Role(kTpRequestsTask, "wave", {{"results", json::array({{{"ok", true}}})}});
  r.Role(kTpRequestsTask, "followup", {{"results", json::array({{{"ok", true}}})}});
  r.Role(kTpControlTask, "stop_profile", {{"ok", true}, {"status", 200}});
  r.Answer(kTpWaitFlushTask, "a", true, {{"signal", "profiler_info"}});
  r.Answer(kTpWaitFlushTask, "b", true, {{"signal", "profiler_info"}});
  ASSERT_EQ(r.s.state, "stopping_service");
  // Every rank finalised: every node is listed beside its stop.
  EXPECT_NE(r.Pending(kServiceStopTask, "a"), nullptr);
  EXPECT_NE(r.Pending(kServiceStopTask, "b"), nullptr);
  ASSERT_NE(r.Pending(kTpListDirsTask, "a"), nullptr) << "listed while the service stops";
  ASSERT_NE(r.Pending(kTpListDirsTask, "b"), nullptr) << "listed while the service stops";
  // The second node's listing answers first; its rank is analysed at once.
  r.Answer(kTpListDirsTask, "b", true, {{"dirs", {"/rt/r1/service-1-node1/vllm_profile/b_2_ascend_pt"}}});
  r.Answer(kTpAnalyseRankTask, "b", true, RankOk("/rt/r1/service-1-node1/vllm_profile/b_2_ascend_pt"));
  r.Answer(kTpListDirsTask, "a", true, {{"dirs", {"/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"}}});
  r.Answer(kTpAnalyseRankTask, "a", true, RankOk("/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"));
  EXPECT_EQ(r.s.state, "stopping_service") << "nothing is judged before every node stopped";
  EXPECT_FALSE(r.s.data.contains("analysis_status")) << "not gated yet";
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  ASSERT_EQ(r.s.state, "analysing");
  EXPECT_EQ(r.PendingAll(kTpListDirsTask).size(), 0u) << "no node is listed twice";
  EXPECT_FALSE(r.s.terminal) << "the run ends after its end clock measure";
  r.Answer(kMachineClockTask, "a", false, json::object(), "timeout");
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kOk) << r.s.error;
  const json m = TorchProfileManifest(r.s);
  EXPECT_EQ(m["rank_count"], 2);
  EXPECT_EQ(m["remote_profile_root"], "/rt/r1/service-1-node0/vllm_profile");
  EXPECT_EQ(m["remote_profile_roots"][0]["machine"], "a");
  EXPECT_EQ(m["remote_profile_dirs"][0]["machine"], "a") << "node order, not the order the listings answered";
  EXPECT_EQ(m["remote_profile_dirs"][1]["machine"], "b");
}

TEST(TorchMultiNode, AfterAFlushThatTimedOutANodeIsListedOnceItsOwnStopConfirmedAndACancelAbandonsIt) {
  MultiTorch r;
  r.ToWorkload();
  r.Role(kTpRequestsTask, "wave", {{"results", json::array({{{"ok", true}}})}});
  r.Role(kTpRequestsTask, "followup", {{"results", json::array({{{"ok", true}}})}});
  r.Role(kTpControlTask, "stop_profile", {{"ok", true}, {"status", 200}});
  r.Answer(kTpWaitFlushTask, "a", true, {{"signal", "profiler_info"}});
  r.Answer(kTpWaitFlushTask, "b", true, {{"signal", "timeout"}, {"flush_timed_out", true}});
  ASSERT_EQ(r.s.state, "stopping_service");
  EXPECT_TRUE(r.PendingAll(kTpListDirsTask).empty()) << "a rank may still be written: listed once stopped";
  r.Answer(kServiceStopTask, "b", true, {{"stopped", false}});
  EXPECT_EQ(r.Pending(kTpListDirsTask, "b"), nullptr) << "not confirmed stopped: not listed";
  ASSERT_NE(r.Pending(kServiceStopTask, "b"), nullptr) << "escalated";
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  ASSERT_NE(r.Pending(kTpListDirsTask, "b"), nullptr) << "a stopped node is listed without waiting for the others";
  EXPECT_EQ(r.Pending(kTpListDirsTask, "a"), nullptr) << "the head is listed once it stopped";
  r.Cancel();
  EXPECT_EQ(r.Pending(kTpListDirsTask, "b"), nullptr) << "the early listing is abandoned";
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kCancelled);
  EXPECT_EQ(r.Pending(kTpListDirsTask, "a"), nullptr);
}

TEST(TorchMultiNode, ANodeThatWroteFewerRankDirsIsNamed) {
  MultiTorch r;
  // Both clock measures (start and end) fail: no offsets, and the run goes on to its verdict.
  r.ToWorkload(false);
  r.ToListing("no_profile_dirs");
  r.Answer(kTpListDirsTask, "a", true, {{"dirs", {"/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"}}});
  r.Answer(kTpListDirsTask, "b", true, {{"dirs", json::array()}});
  r.Answer(kTpAnalyseRankTask, "a", true, RankOk("/rt/r1/service-1-node0/vllm_profile/a_1_ascend_pt"));
  EXPECT_FALSE(r.s.terminal);
  r.Answer(kMachineClockTask, "a", false, json::object(), "timeout");
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("rank_count_mismatch (node 1 (b) wrote 0 of 1 rank directories)"), std::string::npos)
      << r.s.error;
}

TEST(TorchMultiNode, ANodeLostDuringTheWorkloadFailsTheRunByNameAndEveryNodeIsStopped) {
  MultiTorch r;
  r.ToWorkload();
  r.Answer(kServiceWatchTask, "b", false, {{"stderr_tail", "EngineCore died"}}, "service_died");
  EXPECT_EQ(r.s.state, "stopping_service");
  EXPECT_EQ(r.PendingAll(kTpRequestsTask).size(), 0u) << "the workload is abandoned";
  r.Answer(kServiceStopTask, "b", true, {{"already_gone", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node_lost"), std::string::npos) << r.s.error;
  EXPECT_NE(r.s.error.find("node 1 (b)"), std::string::npos) << r.s.error;
}

}  // namespace
}  // namespace npuprof::sm
