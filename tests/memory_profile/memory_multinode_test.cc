// Pure tests of a standalone memory-profile over two machines: every per-node
// step on each node's machine (the step goes on once both answered), every
// node launched at once with the run's RPC port, the headless node with its
// own wrap script, readiness and the inference through the head, the stop headless
// first, the weights read on the head with the whole deployment's dp, and a
// report keyed by (machine, device) with totals per node and in all; a
// failure on one node fails the run naming it, every node stopped. The
// clocks are measured with the head's launch; each node's series is cut at
// the inference window moved onto its clock (the collection waits for the
// measure), or at the head's window as it is when its offset is unknown.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/kind_driver.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/deployment_service.h"
#include "statemachine/inference_window.h"
#include "statemachine/memory_deployment_report.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/memory_profile_nodes.h"
#include "statemachine/memory_report.h"
#include "statemachine/service_spec.h"

namespace npuprof::sm {
namespace {

using testing::KindDriver;

json Record(const std::string& name, const std::string& host) {
  return json{{"name", name}, {"host", host}, {"port", 22}, {"user", "u"}, {"runtime_base", "/rt"}};
}

// tp 1, dp 2 over a (head) and b: one NPU per node (device 0 on each).
json Spec() {
  return json{{"mode", "standalone"},
              {"machine", "a"},
              {"machine_record", Record("a", "127.0.0.2")},
              {"model", "/models/qwen"},
              {"tp", 1},
              {"dp", 2},
              {"nodes",
               {{{"machine", "a"}, {"machine_record", Record("a", "127.0.0.2")}},
                {{"machine", "b"}, {"machine_record", Record("b", "127.0.0.3")}}}}};
}

// b's clock 3.2 s ahead of the worker's, a's 0.1 ms; each within 0.5 ms.
json Clocks(const std::string& when = "start") {
  return {{"when", when},
          {"measured_at_ms", 5},
          {"offsets", {{{"machine", "a"}, {"offset_ms", 0.1}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}},
                       {{"machine", "b"}, {"offset_ms", 3200.1}, {"uncertainty_ms", 0.5}, {"rtt_ms", 1.0}, {"samples", 5}}}}};
}

// The inference read the head's clock around its request: 1000 s to 1000.5 s.
json Inference() { return {{"ok", true}, {"target_clock", {{"before_ns", 1000e9}, {"after_ns", 1000.5e9}}}}; }

json Hbm(double used) { return {{"hbm", {{"0", {{"used_mb", used}, {"total_mb", 65536}}}}}}; }

struct MultiMem : KindDriver {
  MultiMem() : KindDriver(std::make_unique<MemoryProfileMachine>()) {}
  // Answers the step's task on both nodes, b first: the run stays in the step until a's.
  void Both(const std::string& kind, const json& a, const json& b) {
    const std::string state = s.state;
    Answer(kind, "b", true, b);
    EXPECT_EQ(s.state, state) << kind << ": on with the run before every node answered";
    Answer(kind, "a", true, a);
  }
  // clock: how the start's clock measure is answered ("ok", "failed"; "" = left pending).
  void ToReady(const std::string& clock = "ok") {
    Submit(Spec());
    ASSERT_EQ(s.state, "preflight");
    ASSERT_NE(Pending(kMemPreflightTask, "b"), nullptr) << "the preflight runs on every node";
    EXPECT_EQ(Pending(kMemPreflightTask, "b")->payload["wrap_script"], "/rt/r1/msprof_wrap.sh");
    Both(kMemPreflightTask, {{"wrap_script", "/rt/r1/msprof_wrap.sh"}}, {{"wrap_script", "/rt/r1/wrap-b.sh"}});
    ASSERT_EQ(s.state, "baseline");
    Both(kMemNpuSmiTask, Hbm(3000), Hbm(3100));
    ASSERT_EQ(s.state, "service");
    const TaskInfo* head = Pending(kServiceLaunchTask, "a");
    ASSERT_NE(head, nullptr);
    EXPECT_EQ(head->payload["deployment"]["node"], 0);
    EXPECT_EQ(head->payload["runtime_dir"], "/rt/r1/service-1-node0");
    const int32_t rpc = head->payload["deployment"].value("dp_rpc_port", 0);
    EXPECT_GE(rpc, kRpcPortFirst) << "the run's port, checked free by the head";
    const TaskInfo* measure = Pending(kMachineClockTask, "a");
    ASSERT_NE(measure, nullptr) << "the clocks are measured with the launches";
    EXPECT_EQ(measure->payload["machines"].size(), 2u);
    const TaskInfo* b = Pending(kServiceLaunchTask, "b");
    ASSERT_NE(b, nullptr) << "every node is launched at once";
    EXPECT_EQ(b->payload["deployment"]["dp_rpc_port"], rpc);
    EXPECT_EQ(b->payload["deployment"]["headless"], true);
    EXPECT_EQ(b->payload["wrap_script"], "/rt/r1/wrap-b.sh") << "wrapped by its own node's script";
    Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 10}, {"port", 18000}, {"devices", {0}},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", rpc}}}});
    ASSERT_EQ(s.state, "service") << "until every node's launch answered";
    Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 20}, {"devices", {0}}});
    ASSERT_EQ(s.state, "ready");
    EXPECT_EQ(Pending(kServiceWaitReadyTask, "b"), nullptr) << "readiness is the head's";
    EXPECT_NE(Pending(kServiceWatchTask, "b"), nullptr) << "the headless node is watched";
    Answer(kServiceWaitReadyTask, "a", true, {{"ready_after_ms", 10}});
    if (clock == "ok") Answer(kMachineClockTask, "a", true, Clocks());
    if (clock == "failed") Answer(kMachineClockTask, "a", false, json::object(), "timeout");
    EXPECT_EQ(PendingAll(kMachineClockTask).size(), clock.empty() ? 1u : 0u) << "measured once";
  }
  // From the submit through the inference (answered) and the snapshots after
  // it, on both nodes: the headless node's check is pending.
  void ToAfterInference() {
    ToReady();
    Both(kMemNpuSmiTask, Hbm(40000), Hbm(41000));
    Both(kMemLogsTask, {{"summary", json::object()}}, {{"summary", json::object()}});
    Answer(kMemInferTask, "a", true, {{"ok", true}});
    Both(kMemNpuSmiTask, Hbm(40500), Hbm(41500));
  }
  // From after_ready to the collection (every step answered on both nodes;
  // the end's clock measure as `end_clock_ok` says).
  void ToCollection(bool end_clock_ok = true) {
    Both(kMemNpuSmiTask, Hbm(40000), Hbm(41000));
    Both(kMemLogsTask, {{"summary", json::object()}}, {{"summary", json::object()}});
    Answer(kMemInferTask, "a", true, Inference());
    Both(kMemNpuSmiTask, Hbm(40500), Hbm(41500));
    AnswerCheck("b", true);
    Answer(kServiceStopTask, "b", true, {{"stopped", true}});
    Answer(kServiceStopTask, "a", true, {{"stopped", true}});
    AnswerEndClock(end_clock_ok);
    Answer(kMemWeightsTask, "a", true, {{"weights", {{"per_device_bytes", 1048576.0 * 1000}}}});
    Both(kMemWaitFlushTask, {{"signal", "end_info"}}, {{"signal", "end_info"}});
    Both(kMemExportTask, {{"status", "ok"}}, {{"status", "ok"}});
  }
  // Answers the clock measure scheduled beside the stops (when: end).
  void AnswerEndClock(bool ok = true) {
    for (const TaskInfo* t : PendingAll(kMachineClockTask))
      if (t->payload.value("when", "") == "end") {
        Input in;
        in.type = Input::Type::kTaskResult;
        in.task_id = t->task_id;
        in.attempt = t->attempt;
        in.ok = ok;
        in.error_kind = ok ? "" : "timeout";
        in.error = ok ? "" : "no answer";
        in.result = ok ? Clocks("end") : json::object();
        Do(in);
        return;
      }
    ADD_FAILURE() << "no end clock measure pending in state " << s.state;
  }
  // The pending liveness check (a service.watch with `once`) on `machine`.
  const TaskInfo* Check(const std::string& machine) const {
    for (const TaskInfo* t : PendingAll(kServiceWatchTask, machine))
      if (t->payload.value("once", false)) return t;
    return nullptr;
  }
  // Answers it: alive (ok, with the group's live members) or gone (service_died).
  void AnswerCheck(const std::string& machine, bool alive, int members = 3) {
    const TaskInfo* t = Check(machine);
    ASSERT_NE(t, nullptr) << "no liveness check pending on '" << machine << "' in state " << s.state;
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = alive;
    in.error_kind = alive ? "" : "service_died";
    in.error = alive ? "" : "vLLM exited while ready";
    in.result = alive ? json{{"polls", 1}, {"members_left", members}} : json::object();
    Do(in);
  }
  // Fires the armed timer of `purpose`; false when none is armed.
  bool Fire(const std::string& purpose) {
    for (const auto& [id, t] : s.timers) {
      if (!t.armed || t.purpose != purpose) continue;
      Input in;
      in.type = Input::Type::kTimerFired;
      in.timer_id = id;
      Do(in);
      return true;
    }
    return false;
  }
  json CollectEmpty() { return {{"module_mem", json::array()}, {"npu_mem", json::array()}}; }
};

TEST(MemoryMultiNode, EveryNodeRunsItsStepsOnItsMachineAndTheReportKeysDevicesByMachine) {
  MultiMem r;
  r.ToReady();
  ASSERT_EQ(r.s.state, "after_ready");
  r.Both(kMemNpuSmiTask, Hbm(40000), Hbm(41000));
  ASSERT_EQ(r.s.state, "vllm_log");
  EXPECT_EQ(r.Pending(kMemLogsTask, "b")->payload["runtime_dir"], "/rt/r1/service-1-node1");
  r.Both(kMemLogsTask, {{"summary", json::object()}}, {{"summary", json::object()}});
  ASSERT_EQ(r.s.state, "inference");
  EXPECT_EQ(r.Pending(kMemInferTask, "b"), nullptr) << "the inference goes through the head";
  r.Answer(kMemInferTask, "a", true, {{"ok", true}});
  ASSERT_EQ(r.s.state, "after_infer");
  r.Both(kMemNpuSmiTask, Hbm(40500), Hbm(41500));
  EXPECT_EQ(r.s.state, "after_infer") << "until every headless node was checked alive after the inference";
  EXPECT_EQ(r.Pending(kServiceStopTask), nullptr);
  ASSERT_NE(r.Check("b"), nullptr) << "the headless node is checked once, beside its watch";
  EXPECT_EQ(r.Check("b")->payload["runtime_dir"], "/rt/r1/service-1-node1");
  EXPECT_EQ(r.Check("b")->payload["pid"], 20);
  EXPECT_EQ(r.Check("a"), nullptr) << "the head answered the inference itself";
  EXPECT_FALSE(r.Fire("node_check")) << "no timer: the check is one round trip, not a wait";
  r.AnswerCheck("b", true);
  ASSERT_EQ(r.s.state, "stopped");
  EXPECT_EQ(r.Pending(kServiceWatchTask, "b"), nullptr) << "the watch ends before the stop";
  EXPECT_NE(r.Pending(kServiceStopTask, "a"), nullptr) << "every node is stopped at once";
  EXPECT_NE(r.Pending(kServiceStopTask, "b"), nullptr) << "every node is stopped at once";
  ASSERT_EQ(r.PendingAll(kMachineClockTask).size(), 1u) << "the clocks measured again beside the stops";
  EXPECT_EQ(r.PendingAll(kMachineClockTask)[0]->payload["when"], "end");
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  ASSERT_EQ(r.s.state, "weights");
  EXPECT_EQ(r.s.data["stopped"]["stopped"], true);
  EXPECT_EQ(r.s.data["stopped"]["nodes"][1]["machine"], "b");
  const TaskInfo* w = r.Pending(kMemWeightsTask, "a");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->payload["dp"], 2) << "the whole deployment's dp: EP = TP x DP over every node";
  r.Answer(kMemWeightsTask, "a", true, {{"weights", {{"per_device_bytes", 1048576.0 * 1000}}}});
  ASSERT_EQ(r.s.state, "flushed");
  EXPECT_EQ(r.Pending(kMemWaitFlushTask, "b")->payload["msprof_dir"], "/rt/r1/service-1-node1/msprof_data");
  r.Both(kMemWaitFlushTask, {{"signal", "end_info"}}, {{"signal", "end_info"}});
  ASSERT_EQ(r.s.state, "export");
  r.Both(kMemExportTask, {{"status", "ok"}}, {{"status", "ok"}});
  ASSERT_EQ(r.s.state, "msprof");
  r.Both(kMemCollectTask, {{"module_mem", json::array()}, {"npu_mem", json::array()}},
         {{"module_mem", json::array()}, {"npu_mem", json::array()}});
  ASSERT_FALSE(r.s.terminal) << "the run ends once the end's clock measure answered";
  r.AnswerEndClock();
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kOk) << r.s.error;
  EXPECT_TRUE(r.s.data["clock"]["end"].is_object()) << "measured at the start and at the end";

  const json report = BuildMemoryReport(MemoryEvidenceFromState(r.s));
  ASSERT_EQ(report["devices"].size(), 2u);
  EXPECT_EQ(report["devices"][0]["machine"], "a");
  EXPECT_EQ(report["devices"][1]["machine"], "b");
  EXPECT_EQ(report["devices"][1]["device_id"], 0);
  EXPECT_EQ(report["devices"][1]["hbm_used_mb"], 41500.0) << "node b's own snapshot";
  ASSERT_EQ(report["nodes"].size(), 2u);
  EXPECT_EQ(report["nodes"][1]["totals"]["hbm_used_mb"], 41500.0);
  EXPECT_EQ(report["totals"]["hbm_used_mb"], 82000.0);
  EXPECT_EQ(report["totals"]["components_mb"]["fixed_overhead"], 6100.0) << "each node's own baseline";
  EXPECT_EQ(report["totals"]["devices"], 2);
  const json manifest = MemoryProfileMachine().Manifest(r.s);
  ASSERT_EQ(manifest["nodes"].size(), 1u) << "every node but the head";
  EXPECT_EQ(manifest["nodes"][0]["machine"], "b");
  EXPECT_EQ(manifest["nodes"][0]["after_infer_hbm"]["0"]["used_mb"], 41500.0);
  EXPECT_EQ(manifest["nodes"][0]["files_dir"], "nodes/b/");
  const json summary = MemoryProfileMachine().Summary(r.s);
  EXPECT_EQ(summary["nodes"][1]["stopped"], true);
  EXPECT_EQ(summary["report_summary"]["devices"][1]["machine"], "b");
  EXPECT_DOUBLE_EQ(manifest["clock_offsets"]["start"]["offsets"][1]["offset_ms"].get<double>(), 3200.1);
  EXPECT_TRUE(summary["clock"]["start"].is_object());
}

TEST(MemoryMultiNode, EachNodesSeriesIsCutAtTheWindowMovedOntoItsClock) {
  MultiMem r;
  r.ToReady();
  r.ToCollection();
  ASSERT_EQ(r.s.state, "msprof");
  const json wa = r.Pending(kMemCollectTask, "a")->payload["inference_window"];
  const json wb = r.Pending(kMemCollectTask, "b")->payload["inference_window"];
  EXPECT_DOUBLE_EQ(wa["start_us"].get<double>(), 1000e6) << "the head's own clock";
  EXPECT_DOUBLE_EQ(wa["margin_us"].get<double>(), kTargetMarginUs);
  EXPECT_DOUBLE_EQ(wb["start_us"].get<double>(), 1000e6 + 3200e3) << "b's clock: 3200.1 - 0.1 ms ahead of a's";
  EXPECT_DOUBLE_EQ(wb["end_us"].get<double>(), 1000.5e6 + 3200e3);
  EXPECT_DOUBLE_EQ(wb["margin_us"].get<double>(), kTargetMarginUs + 1000) << "both uncertainties";
  r.Both(kMemCollectTask, r.CollectEmpty(), r.CollectEmpty());
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kOk) << r.s.error;
  EXPECT_EQ(MemNodeField(r.s, 1, "msprof")["window_clock"]["moved"], true);
}

TEST(MemoryMultiNode, TheCollectionWaitsForTheClockMeasure) {
  MultiMem r;
  r.ToReady("");
  r.ToCollection();
  ASSERT_EQ(r.s.state, "msprof");
  EXPECT_TRUE(r.PendingAll(kMemCollectTask).empty()) << "no window before the offsets are known";
  r.Answer(kMachineClockTask, "a", true, Clocks());
  const TaskInfo* b = r.Pending(kMemCollectTask, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_DOUBLE_EQ(b->payload["inference_window"]["start_us"].get<double>(), 1000e6 + 3200e3);
}

TEST(MemoryMultiNode, ANodeWhoseOffsetIsUnknownIsCutAtTheHeadsWindowAndSaysSo) {
  MultiMem r;
  r.ToReady("failed");
  r.ToCollection(/*end_clock_ok=*/false);
  ASSERT_EQ(r.s.state, "msprof");
  const json wb = r.Pending(kMemCollectTask, "b")->payload["inference_window"];
  EXPECT_DOUBLE_EQ(wb["start_us"].get<double>(), 1000e6);
  EXPECT_DOUBLE_EQ(wb["margin_us"].get<double>(), kTargetMarginUs);
  r.Both(kMemCollectTask, r.CollectEmpty(), r.CollectEmpty());
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kOk) << r.s.error;
  const json clock = MemNodeField(r.s, 1, "msprof")["window_clock"];
  EXPECT_EQ(clock["moved"], false);
  EXPECT_NE(clock.value("note", "").find("not measured"), std::string::npos) << clock.dump();
}

TEST(MemoryMultiNode, AFailingRunEndsAfterItsClockMeasureAnswered) {
  MultiMem r;
  r.Submit(Spec());
  r.Both(kMemPreflightTask, {{"wrap_script", "/rt/r1/msprof_wrap.sh"}}, {{"wrap_script", "/rt/r1/msprof_wrap.sh"}});
  r.Both(kMemNpuSmiTask, Hbm(3000), Hbm(3100));
  r.Answer(kServiceLaunchTask, "a", true,
           {{"runtime_dir", "/rt/r1/service-1-node0"}, {"pid", 10}, {"port", 18000}, {"devices", {0}},
            {"deployment", {{"node", 0}, {"nodes", 2}, {"dp_rpc_port", 29500}}}});
  r.Answer(kServiceLaunchTask, "b", true, {{"runtime_dir", "/rt/r1/service-1-node1"}, {"pid", 20}, {"devices", {0}}});
  r.Answer(kServiceWaitReadyTask, "a", false, json::object(), "timeout");
  r.Both(kMemLogsTask, {{"summary", json::object()}}, {{"summary", json::object()}});
  r.Answer(kServiceStopTask, "b", true, {{"stopped", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  r.AnswerEndClock();
  ASSERT_FALSE(r.s.terminal) << "the start's clock measure is still out";
  r.Answer(kMachineClockTask, "a", false, json::object(), "timeout");
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("ready"), std::string::npos) << r.s.error;
}

TEST(InferenceWindowOnNodeClock, MovesByTheOffsetsDifferenceAndWidensByTheUncertainties) {
  const ChosenWindow target{{1000e6, 1001e6}, "target", 0, 999e6};
  const auto moved = WindowOnNodeClock(target, NodeClockOffset{10, 2}, NodeClockOffset{3210, 3});
  ASSERT_TRUE(moved);
  EXPECT_DOUBLE_EQ(moved->window.start_us, 1000e6 + 3200e3);
  EXPECT_DOUBLE_EQ(moved->window.end_us, 1001e6 + 3200e3);
  EXPECT_DOUBLE_EQ(*moved->ready_us, 999e6 + 3200e3);
  EXPECT_DOUBLE_EQ(moved->margin_us, 5000);
  EXPECT_FALSE(WindowOnNodeClock(target, std::nullopt, NodeClockOffset{3210, 3})) << "the head's offset is needed";
  EXPECT_FALSE(WindowOnNodeClock(target, NodeClockOffset{10, 2}, std::nullopt));
  // A server window is on the server's clock: it moves by the node's offset alone.
  const ChosenWindow server{{1000e6, 1001e6}, "server", kServerMarginUs, std::nullopt};
  const auto s = WindowOnNodeClock(server, std::nullopt, NodeClockOffset{3210, 3});
  ASSERT_TRUE(s);
  EXPECT_DOUBLE_EQ(s->window.start_us, 1000e6 + 3210e3);
  EXPECT_DOUBLE_EQ(s->margin_us, kServerMarginUs + 3000);
}

TEST(MemoryMultiNode, ACriticalStepFailedOnOneNodeFailsTheRunNamingIt) {
  MultiMem r;
  r.Submit(Spec());
  r.Both(kMemPreflightTask, {{"wrap_script", "/rt/r1/msprof_wrap.sh"}}, {{"wrap_script", "/rt/r1/msprof_wrap.sh"}});
  r.Answer(kMemNpuSmiTask, "a", true, Hbm(3000));
  r.Answer(kMemNpuSmiTask, "b", false, json::object(), "npu_smi_failed");
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b): baseline"), std::string::npos) << r.s.error;
  EXPECT_TRUE(r.PendingAll(kServiceLaunchTask).empty()) << "nothing was launched";
}

TEST(MemoryMultiNode, AHeadlessNodeThatDiesFailsTheRunAndEveryNodeIsStopped) {
  MultiMem r;
  r.ToReady();
  ASSERT_EQ(r.s.state, "after_ready");
  r.Answer(kServiceWatchTask, "b", false, json::object(), "service_died");
  ASSERT_EQ(r.s.state, "vllm_log") << "the cleanup reads every node's log first";
  r.Both(kMemLogsTask, {{"summary", json::object()}}, {{"summary", json::object()}});
  ASSERT_EQ(r.s.state, "stopped");
  EXPECT_NE(r.Pending(kServiceStopTask, "a"), nullptr) << "every node is stopped at once";
  EXPECT_NE(r.Pending(kServiceStopTask, "b"), nullptr) << "every node is stopped at once";
  r.Answer(kServiceStopTask, "b", true, {{"already_gone", true}, {"stderr_tail", "RuntimeError: rank died\n"}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  r.AnswerEndClock();
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b)"), std::string::npos) << r.s.error;
  EXPECT_NE(r.s.error.find("RuntimeError: rank died"), std::string::npos) << r.s.error;
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(NodeStopConfirmed(r.s, i)) << i;
}

TEST(MemoryMultiNode, ANodeLostDuringTheInferenceIsNamedByItsCheckBeforeTheStop) {
  MultiMem r;
  r.ToReady();
  r.Both(kMemNpuSmiTask, Hbm(40000), Hbm(41000));
  r.Both(kMemLogsTask, {{"summary", json::object()}}, {{"summary", json::object()}});
  r.Answer(kMemInferTask, "a", false, json::object(), "inference_failed");
  r.Both(kMemNpuSmiTask, Hbm(40500), Hbm(41500));
  EXPECT_EQ(r.Pending(kServiceStopTask), nullptr) << "the stop waits for the nodes' checks";
  r.AnswerCheck("b", false);
  EXPECT_EQ(r.Check("b"), nullptr);
  r.Answer(kServiceStopTask, "b", true, {{"already_gone", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  r.AnswerEndClock();
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b): its service died"), std::string::npos) << r.s.error;
}

// Under msprof's wrap the group's leader is msprof, which outlives vLLM (it
// flushes and exports after vLLM exits): a check that finds msprof alone
// has found the node's vLLM gone.
TEST(MemoryMultiNode, ACheckThatFindsOnlyMsprofLeftOnANodeFailsTheRunNamingIt) {
  MultiMem r;
  r.ToAfterInference();
  r.AnswerCheck("b", true, 1);
  r.Answer(kServiceStopTask, "b", true, {{"already_gone", true}});
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  r.AnswerEndClock();
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b): its service died: only msprof's process was left"), std::string::npos)
      << r.s.error;
}

TEST(MemoryMultiNode, AnUnforcedStopThatFailsIsRepeatedWithForceAndAStopThatCannotEndItFailsTheRun) {
  MultiMem r;
  r.ToAfterInference();
  r.AnswerCheck("b", true);
  r.Answer(kServiceStopTask, "b", false, json::object(), "still_running");
  // The forced stop comes once the stop step's other answers are in.
  r.Answer(kServiceStopTask, "a", true, {{"stopped", true}});
  const TaskInfo* again = r.Pending(kServiceStopTask, "b");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->payload["force"], true);
  r.Answer(kServiceStopTask, "b", true, {{"stopped", false}});
  r.AnswerEndClock();
  // The walk goes on with what can still be read; the run fails at its end,
  // once the headers read beside the stop have answered.
  EXPECT_EQ(r.s.data["stopped"]["stopped"], false);
  EXPECT_FALSE(r.s.terminal);
  r.Answer(kMemWeightsTask, "a", true, {{"weights", nullptr}});
  ASSERT_TRUE(r.s.terminal);
  EXPECT_EQ(r.s.status, RunStatus::kFailed);
  EXPECT_NE(r.s.error.find("node 1 (b), pid 20"), std::string::npos) << r.s.error;
}

TEST(MemoryDeploymentReport, TotalsSumTheDevicesThatMeasuredAValue) {
  const json dev = {{"hbm_used_mb", 100.0},
                    {"hbm_total_mb", 1000.0},
                    {"components", {{{"key", "weights"}, {"value_mb", 10.0}}, {{"key", "kv_cache"}, {"value_mb", nullptr}}}}};
  const json t = MemoryDeviceTotals(json::array({dev, dev}));
  EXPECT_EQ(t["devices"], 2);
  EXPECT_EQ(t["hbm_used_mb"], 200.0);
  EXPECT_EQ(t["components_mb"]["weights"], 20.0);
  EXPECT_TRUE(t["components_mb"]["kv_cache"].is_null()) << "no device measured it";
  const json merged = MergeNodeMemoryReports(
      {{{"node", 0}, {"machine", "a"}, {"report", {{"devices", {dev}}, {"msprof", {{"status", "ok"}}}, {"notes", {"x"}}}}},
       {{"node", 1}, {"machine", "b"}, {"report", {{"devices", {dev}}, {"msprof", {{"status", "export_timeout"}}},
                                                   {"notes", {"x", "y"}}}}}});
  EXPECT_EQ(merged["devices"][1]["machine"], "b");
  EXPECT_EQ(merged["msprof"]["status"], "export_timeout");
  EXPECT_EQ(merged["msprof"]["status_node"], "node 1 (b)");
  EXPECT_EQ(merged["notes"], json({"x", "node 1 (b): y"}));
}

}  // namespace
}  // namespace npuprof::sm
