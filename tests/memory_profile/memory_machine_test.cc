// The memory-profile state machine driven through the pure engine: step
// order, failure paths (msprof missing, never ready), export timeout, attach.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/lease_inputs.h"
#include "statemachine/engine.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/memory_profile_machine.h"
#include "statemachine/memory_profile_spec.h"
#include "statemachine/service_spec.h"

namespace npuprof::sm {
namespace {

json Machine() {
  return {{"name", "m1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}, {"runtime_base", "/tmp/rt"},
          {"env_script", ""}};
}

class Driver {
 public:
  const std::vector<std::string>& types() const { return types_; }
  explicit Driver(const std::string& id) { s_.run_id = id; }
  std::vector<NewEvent> Feed(const Input& in) {
    auto evs = Decide(DefaultKinds(), s_, in);
    EXPECT_TRUE(evs.ok()) << evs.status().ToString();
    if (!evs.ok()) return {};
    for (const auto& e : *evs) {
      Apply(DefaultKinds(), s_, e.type, e.payload, s_.last_seq + 1, in.now_ms);
      types_.push_back(e.type);
    }
    return *evs;
  }
  void Submit(json spec) {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = "memory-profile";
    in.spec = std::move(spec);
    in.now_ms = now_ += 10;
    Feed(in);
    while (auto lease = npuprof::sm::testing::NextLeaseInput(s_)) {
      lease->now_ms = now_ += 10;
      Feed(*lease);
    }
  }
  // The in-flight task scheduled first (of `kind` when given): ids end in
  // ".t<n>", n counting up, so "r.t10" comes after "r.t9".
  const TaskInfo* Pending(const std::string& kind = "") const {
    const TaskInfo* first = nullptr;
    const auto number = [](const std::string& id) { return std::stol(id.substr(id.rfind(".t") + 2)); };
    for (const auto& [id, t] : s_.tasks)
      if (t.in_flight() && (kind.empty() || t.kind == kind) && (first == nullptr || number(id) < number(first->task_id)))
        first = &t;
    return first;
  }
  std::string PendingKind() const { return Pending() ? Pending()->kind : ""; }
  // Answers the task Pending(kind) names.
  void Succeed(json result, json blobs = json::object(), const std::string& kind = "") {
    const TaskInfo* t = Pending(kind);
    ASSERT_NE(t, nullptr);
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = true;
    in.result = std::move(result);
    in.blobs = std::move(blobs);
    in.now_ms = now_ += 10;
    Feed(in);
  }
  void Fail(const std::string& kind, const std::string& error, json result = json::object(),
            const std::string& task_kind = "") {
    const TaskInfo* t = Pending(task_kind);
    ASSERT_NE(t, nullptr);
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = false;
    in.retryable = false;
    in.error_kind = kind;
    in.error = error;
    in.result = std::move(result);
    in.now_ms = now_ += 10;
    Feed(in);
  }
  bool FireTimer(const std::string& purpose) {
    for (const auto& [id, t] : s_.timers) {
      if (!t.armed || t.purpose != purpose) continue;
      Input in;
      in.type = Input::Type::kTimerFired;
      in.timer_id = id;
      in.now_ms = now_ = std::max(now_, t.deadline_ms);
      Feed(in);
      return true;
    }
    return false;
  }
  void Signal(const std::string& name, json payload) {
    Input in;
    in.type = Input::Type::kSignal;
    in.signal = name;
    in.result = std::move(payload);
    in.now_ms = now_ += 10;
    Feed(in);
  }
  const RunState& s() const { return s_; }
  // The state as a store written with another schema would fold it.
  RunState& Edit() { return s_; }

 private:
  RunState s_;
  int64_t now_ = 1000;
  std::vector<std::string> types_;  // every event decided, in order
};

json StandaloneSpec() {
  return {{"machine", "m1"}, {"machine_record", Machine()}, {"model", "/models/m"}, {"tp", 2}, {"port", 18001}};
}

json Hbm(double used) {
  return {{"0", {{"used_mb", used}, {"total_mb", 65536}}}, {"1", {{"used_mb", used}, {"total_mb", 65536}}}};
}

TEST(MemoryMachine, SpecDefaultsFollowTheWorkflow) {
  json spec = {{"machine", "m1"}, {"machine_record", Machine()}, {"model", "/models/m"}, {"tp", 2}};
  const RunKind* k = DefaultKinds().Find("memory-profile");
  ASSERT_NE(k, nullptr);
  ASSERT_TRUE(k->ValidateSpec(spec).ok());
  EXPECT_EQ(spec["port"], nullptr);               // a free port on the target, as serve
  EXPECT_EQ(spec["served_model_name"], nullptr);  // per run: npuprof-mem-<run_id>
  auto typed = DecodeRunSpec("memory-profile", spec);
  ASSERT_TRUE(typed.ok() && *typed) << typed.status().message();
  const auto& mspec = dynamic_cast<const run_specs::MemoryProfileSpec&>(**typed);
  EXPECT_EQ(MemoryServedName(mspec, "r7"), "npuprof-mem-r7");
  const std::vector<std::string> args = MemoryServeArgs(mspec);
  EXPECT_EQ(args, std::vector<std::string>({"--gpu-memory-utilization", "0.85", "--max-model-len", "2048",
                                            "--trust-remote-code"}))
      << "the defaults, and no flag for a config left null";
  EXPECT_EQ(spec["devices"], json({0, 1}));
  EXPECT_DOUBLE_EQ(spec["gpu_memory_utilization"].get<double>(), 0.85);
  EXPECT_EQ(spec["max_model_len"], 2048);
  EXPECT_EQ(spec["max_tokens"], 128);
  EXPECT_EQ(spec["msprof_mem_freq"], 50);
  EXPECT_EQ(spec["export_timeout_s"], 1800);
  EXPECT_EQ(spec["flush_s"], 0);             // no fixed window: the flush wait observes msprof
  EXPECT_EQ(spec["flush_timeout_s"], 300);
  json bad_timeout = StandaloneSpec();
  bad_timeout["flush_timeout_s"] = 0;
  EXPECT_NE(k->ValidateSpec(bad_timeout).message().find("flush_timeout_s"), std::string::npos);
  json bad = StandaloneSpec();
  bad["speculative_config"] = "{not json";
  EXPECT_FALSE(k->ValidateSpec(bad).ok());
  json bad2 = StandaloneSpec();
  bad2["msprof_mem_freq"] = 1000;
  EXPECT_FALSE(k->ValidateSpec(bad2).ok());
  json att = {{"mode", "attach"}, {"attach_run", "r0"}, {"machine", "m1"}, {"machine_record", Machine()},
              {"attach_run_record", {{"kind", "probe"}}}};
  EXPECT_FALSE(k->ValidateSpec(att).ok());
}

TEST(MemoryMachine, StandaloneHappyPathStepOrder) {
  Driver d("mp1");
  d.Submit(StandaloneSpec());
  EXPECT_EQ(d.PendingKind(), kMemPreflightTask);
  d.Succeed({{"wrap_script", "/tmp/rt/mp1/msprof_wrap.sh"}, {"python", "/usr/bin/python3"}});
  EXPECT_EQ(d.PendingKind(), kMemNpuSmiTask);
  d.Succeed({{"hbm", Hbm(2862)}}, {{"baseline_npu_smi.txt", "sha-b"}});
  ASSERT_EQ(d.PendingKind(), kServiceLaunchTask);
  const json launch = d.Pending()->payload;
  EXPECT_EQ(launch["wrap_script"], "/tmp/rt/mp1/msprof_wrap.sh");
  EXPECT_EQ(launch["served_model_name"], "npuprof-mem-mp1");
  EXPECT_EQ(launch["port"], 18001);
  EXPECT_EQ(launch["devices"], json({0, 1}));
  EXPECT_NE(launch["extra_args"].dump().find("--gpu-memory-utilization"), std::string::npos);
  d.Succeed({{"runtime_dir", "/tmp/rt/mp1/service-1"}, {"pid", 4242}, {"port", 18001}, {"devices", {0, 1}},
             {"stdout_log", "/tmp/rt/mp1/service-1/stdout.log"}, {"stderr_log", "/tmp/rt/mp1/service-1/stderr.log"}});
  EXPECT_EQ(d.PendingKind(), kServiceWaitReadyTask);
  d.Succeed({{"ready_after_ms", 500}});
  EXPECT_EQ(d.PendingKind(), kMemNpuSmiTask);
  EXPECT_EQ(d.Pending()->payload["phase"], "after_ready");
  d.Succeed({{"hbm", Hbm(59299)}}, {{"after_ready_npu_smi.txt", "sha-r"}});
  EXPECT_EQ(d.PendingKind(), kMemLogsTask);
  d.Succeed({{"summary", {{"weights_gib", 7.0}, {"kv_cache_available_gib", 46.0}}}}, {{"vllm_serve.log", "sha-l"}});
  EXPECT_EQ(d.PendingKind(), kMemInferTask);
  const int64_t infer_scheduled = d.Pending()->payload["server_scheduled_ms"].get<int64_t>();
  d.Succeed({{"ok", true}, {"http_status", 200},
             {"target_clock", {{"before_ns", int64_t{1'700'000'000'000'000'000}},
                               {"after_ns", int64_t{1'700'000'000'300'000'000}}}}});
  EXPECT_EQ(d.s().data["inference"]["server_window_ms"]["start_ms"], infer_scheduled);
  EXPECT_GT(d.s().data["inference"]["server_window_ms"]["end_ms"].get<int64_t>(), infer_scheduled);
  EXPECT_EQ(d.Pending()->payload["phase"], "after_infer");
  d.Succeed({{"hbm", Hbm(59479)}}, {{"after_infer_npu_smi.txt", "sha-i"}});
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  EXPECT_EQ(d.Pending()->payload["pid"], 4242);
  d.Succeed({{"stopped", true}});
  EXPECT_EQ(d.PendingKind(), kMemWeightsTask);
  d.Succeed({{"weights", {{"per_device_bytes", 7615691776.0}, {"total_bytes", 15230974976.0}}}},
            {{"weight_manifest.json", "sha-w"}});
  EXPECT_EQ(d.s().state, "flushed");
  ASSERT_EQ(d.PendingKind(), kMemWaitFlushTask);
  EXPECT_FALSE(d.FireTimer("flush"));  // flush_s 0: no minimum window
  EXPECT_EQ(d.Pending()->payload["msprof_dir"], "/tmp/rt/mp1/service-1/msprof_data");
  EXPECT_EQ(d.Pending()->payload["pid"], 4242);
  EXPECT_EQ(d.Pending()->payload["stdout_log"], "/tmp/rt/mp1/service-1/stdout.log");
  EXPECT_EQ(d.Pending()->payload["timeout_s"], 300);
  d.Succeed({{"signal", "end_info"}, {"flush_timed_out", false}, {"waited_ms", 40}});
  ASSERT_EQ(d.PendingKind(), kMemExportTask);
  EXPECT_EQ(d.Pending()->payload["msprof_dir"], "/tmp/rt/mp1/service-1/msprof_data");
  d.Succeed({{"status", "ok"}, {"exit_code", 0}});
  EXPECT_EQ(d.PendingKind(), kMemCollectTask);
  // The collect step cuts the series at the request's window on the target's clock.
  const json window = d.Pending()->payload["inference_window"];
  EXPECT_EQ(window["clock"], "target");
  EXPECT_DOUBLE_EQ(window["start_us"].get<double>(), 1.7e15);
  EXPECT_DOUBLE_EQ(window["end_us"].get<double>(), 1.7e15 + 3e5);
  d.Succeed({{"module_mem", json::array({{{"file", "npu_module_mem_1.csv"}, {"component", "HCCL"}, {"device_id", 0},
                                          {"max_mb", 597.65625}, {"row", 2}}})},
             {"npu_mem", json::array()},
             {"activation_peaks", json::array({{{"device_id", 0}, {"file", "npu_mem_1.csv"}, {"ok", true},
                                                {"value_mb", 180.0}, {"peak", {{"row", 9}}}}})},
             {"__prof_device_map__", {{"npu_module_mem_1.csv", {0}}}}},
            {{"msprof_csvs/npu_module_mem_1.csv", "sha-c"}, {"msprof_csvs/npu_mem_1.csv", "sha-n"}});
  EXPECT_TRUE(d.s().terminal);
  EXPECT_EQ(d.s().status, RunStatus::kOk);

  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  EXPECT_EQ(m["mode"], "standalone");
  EXPECT_EQ(m["baseline_hbm"]["0"]["used_mb"], 2862);
  EXPECT_EQ(m["after_ready_hbm"]["1"]["used_mb"], 59299);
  EXPECT_EQ(m["after_infer_hbm"]["1"]["used_mb"], 59479);
  EXPECT_EQ(m["msprof_csvs"]["__prof_device_map__"]["npu_module_mem_1.csv"], json({0}));
  EXPECT_EQ(m["files"]["baseline_npu_smi.txt"], "sha-b");
  EXPECT_EQ(m["files"]["msprof_csvs/npu_module_mem_1.csv"], "sha-c");
  EXPECT_EQ(m["report"]["devices"][0]["components"][4]["key"], "hccl");
  EXPECT_EQ(m["report"]["devices"][0]["components"][4]["evidence"][0]["blob"], "sha-c");
  // The series peak is the report's activation, its CSV blob the evidence.
  EXPECT_EQ(m["report"]["devices"][0]["components"][8]["key"], "activation_peak");
  EXPECT_EQ(m["report"]["devices"][0]["components"][8]["source"], "series");
  EXPECT_EQ(m["report"]["devices"][0]["components"][8]["evidence"][0]["blob"], "sha-n");
  EXPECT_EQ(m["report"]["devices"][1]["components"][8]["source"], "npu_smi_delta");
  EXPECT_EQ(m["tp"], 2);

  // Evidence is recorded as domain events (memory_profile_events.h), never as the generic form.
  const auto& types = d.types();
  for (const char* t : {"PreflightChecked", "BaselineRecorded", "ServiceLaunched", "ServiceReady",
                        "AfterReadyRecorded", "VllmLogRead", "InferenceDone", "AfterInferenceRecorded",
                        "ServiceStopped", "WeightsRead", "MsprofFlushed", "MsprofExported", "MsprofCollected"})
    EXPECT_EQ(std::count(types.begin(), types.end(), t), 1) << t;
  EXPECT_EQ(std::count(types.begin(), types.end(), std::string(kMemRecorded)), 0);
}

TEST(MemoryMachine, MsprofMissingFailsBeforeAnythingIsLaunched) {
  Driver d("mp2");
  d.Submit(StandaloneSpec());
  d.Fail("msprof_missing", "msprof is not on PATH", json::object(), kMemPreflightTask);
  EXPECT_FALSE(d.s().terminal) << "the baseline beside the preflight is answered first";
  EXPECT_EQ(d.PendingKind(), kMemNpuSmiTask);
  d.Succeed({{"hbm", Hbm(2862)}});
  EXPECT_TRUE(d.s().terminal);
  EXPECT_EQ(d.s().status, RunStatus::kFailed);
  EXPECT_NE(d.s().error.find("msprof"), std::string::npos);
  for (const auto& [id, t] : d.s().tasks) EXPECT_NE(t.kind, kServiceLaunchTask);
}

TEST(MemoryMachine, LaunchThatNeverHappenedSkipsLogsAndStop) {
  Driver d("mp9");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/tmp/rt/mp9/msprof_wrap.sh"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  ASSERT_EQ(d.PendingKind(), kServiceLaunchTask);
  d.Fail("untrusted_runtime", "/tmp/rt/mp9/service-1/launch.json is owned by uid 65534", {{"started", false}});
  EXPECT_TRUE(d.s().terminal);
  EXPECT_EQ(d.s().status, RunStatus::kFailed);
  EXPECT_NE(d.s().error.find("the service was never launched"), std::string::npos) << d.s().error;
  EXPECT_NE(d.s().error.find("uid 65534"), std::string::npos) << d.s().error;
  for (const auto& [id, t] : d.s().tasks) {
    EXPECT_NE(t.kind, kServiceStopTask);
    EXPECT_NE(t.kind, kMemLogsTask);
  }
}

TEST(MemoryMachine, LaunchThatMayHaveStartedIsStoppedAndAStopThatFindsNothingSaysSo) {
  Driver d("mp8");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/tmp/rt/mp8/msprof_wrap.sh"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  d.Fail("connection_lost", "the connection dropped");  // no started=false: it may have started
  EXPECT_EQ(d.PendingKind(), kMemLogsTask);
  d.Succeed({{"summary", json::object()}});
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  EXPECT_FALSE(d.Pending()->payload.contains("pid")) << "pid not given: the handler reads <runtime_dir>/pid";
  EXPECT_EQ(d.Pending()->payload["runtime_dir"], "/tmp/rt/mp8/service-1");
  d.Succeed({{"stopped", true}, {"already_gone", true}, {"never_started", true}});
  EXPECT_EQ(d.s().status, RunStatus::kFailed);
  EXPECT_NE(d.s().error.find("the service was never launched"), std::string::npos) << d.s().error;
}

TEST(MemoryMachine, NeverReadyCollectsLogsThenStops) {
  Driver d("mp3");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/tmp/rt/mp3/msprof_wrap.sh"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  d.Succeed({{"runtime_dir", "/tmp/rt/mp3/service-1"}, {"pid", 77}, {"port", 18001}});
  ASSERT_EQ(d.PendingKind(), kServiceWaitReadyTask);
  d.Fail("never_ready", "no /health within 300 s; hint: ...");
  EXPECT_EQ(d.PendingKind(), kMemLogsTask);
  d.Succeed({{"summary", json::object()}});
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  d.Succeed({{"stopped", true}});
  EXPECT_TRUE(d.s().terminal);
  EXPECT_EQ(d.s().status, RunStatus::kFailed);
  EXPECT_NE(d.s().error.find("never_ready"), std::string::npos);
}

// A standalone run up to its stop: the preflight, the baseline, the launch
// (its answer `launch` with the run's runtime dir, pid 5 and port 18001
// added), readiness, the after-ready snapshot, the logs, the inference and
// the after-inference snapshot each succeed; the stop is pending then.
void RunToTheStop(Driver& d, const json& spec, json launch = json::object()) {
  d.Submit(spec);
  d.Succeed({{"wrap_script", "/w"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  launch["runtime_dir"] = "/tmp/rt/" + d.s().run_id + "/service-1";
  launch["pid"] = 5;
  launch["port"] = 18001;
  d.Succeed(launch);
  d.Succeed(json::object());
  d.Succeed({{"hbm", Hbm(50000)}});
  d.Succeed({{"summary", json::object()}});
  d.Succeed({{"ok", true}});
  d.Succeed({{"hbm", Hbm(50100)}});
}

// A standalone run up to the flush step: every step before it succeeds.
void RunToFlushing(Driver& d, const json& spec) {
  RunToTheStop(d, spec);
  d.Succeed({{"stopped", true}});
  d.Succeed({{"weights", nullptr}});
  EXPECT_EQ(d.s().state, "flushed");
}

// The safetensors headers need nothing from the service: they are read while
// it stops (the stop waits seconds for msprof's flush and export), in either
// order of the answers, and the walk passes over their step once done.
TEST(MemoryMachine, TheHeadersAreReadBesideTheStopInEitherOrder) {
  for (const bool headers_first : {true, false}) {
    Driver d(headers_first ? "mp13" : "mp14");
    d.Submit(StandaloneSpec());
    d.Succeed({{"wrap_script", "/w"}});
    d.Succeed({{"hbm", Hbm(2862)}});
    d.Succeed({{"runtime_dir", "/tmp/rt/" + d.s().run_id + "/service-1"}, {"pid", 5}, {"port", 18001}});
    d.Succeed(json::object());
    d.Succeed({{"hbm", Hbm(50000)}});
    d.Succeed({{"summary", json::object()}});
    d.Succeed({{"ok", true}});
    EXPECT_EQ(d.Pending(kMemWeightsTask), nullptr) << "not before the stop";
    d.Succeed({{"hbm", Hbm(50100)}});
    ASSERT_EQ(d.s().state, "stopped");
    ASSERT_NE(d.Pending(kServiceStopTask), nullptr);
    ASSERT_NE(d.Pending(kMemWeightsTask), nullptr) << "scheduled with the stop";
    EXPECT_EQ(d.Pending(kMemWeightsTask)->payload["model"], "/models/m");
    const json weights = {{"weights", {{"per_device_bytes", 7615691776.0}, {"total_bytes", 15230974976.0}}}};
    if (headers_first) {
      d.Succeed(weights, json::object(), kMemWeightsTask);
      EXPECT_EQ(d.s().state, "stopped") << "the stop still runs";
      EXPECT_EQ(d.PendingKind(), kServiceStopTask);
      d.Succeed({{"stopped", true}}, json::object(), kServiceStopTask);
    } else {
      d.Succeed({{"stopped", true}}, json::object(), kServiceStopTask);
      EXPECT_EQ(d.s().state, "weights");
      EXPECT_EQ(d.Pending(kMemWaitFlushTask), nullptr) << "the flush wait comes after the headers";
      d.Succeed(weights, json::object(), kMemWeightsTask);
    }
    EXPECT_EQ(d.s().state, "flushed");
    EXPECT_EQ(d.PendingKind(), kMemWaitFlushTask);
    EXPECT_EQ(d.s().data["weights"]["total_bytes"], 15230974976.0);
  }
}

// The baseline snapshot runs beside the preflight, and the log read beside
// the after-ready snapshot (issue 42): the launch waits for both answers, in
// either order, and so does the inference.
TEST(MemoryMachine, TheBaselineAndTheLogsRunBesideTheStepBeforeThemInEitherOrder) {
  std::vector<std::vector<std::string>> types;  // the events of each order, sorted
  for (const bool second_first : {true, false}) {
    Driver d(second_first ? "mp40" : "mp41");
    d.Submit(StandaloneSpec());
    ASSERT_NE(d.Pending(kMemPreflightTask), nullptr);
    ASSERT_NE(d.Pending(kMemNpuSmiTask), nullptr) << "the baseline beside the preflight";
    EXPECT_EQ(d.Pending(kMemNpuSmiTask)->payload["phase"], "baseline");
    if (second_first) {
      d.Succeed({{"hbm", Hbm(2862)}}, json::object(), kMemNpuSmiTask);
      EXPECT_EQ(d.s().state, "preflight");
      EXPECT_EQ(d.Pending(kServiceLaunchTask), nullptr) << "not before the preflight answered";
      d.Succeed({{"wrap_script", "/w"}}, json::object(), kMemPreflightTask);
    } else {
      d.Succeed({{"wrap_script", "/w"}}, json::object(), kMemPreflightTask);
      EXPECT_EQ(d.s().state, "baseline");
      EXPECT_EQ(d.Pending(kServiceLaunchTask), nullptr) << "not before the baseline answered";
      d.Succeed({{"hbm", Hbm(2862)}}, json::object(), kMemNpuSmiTask);
    }
    EXPECT_EQ(d.s().state, "service");
    ASSERT_EQ(d.PendingKind(), kServiceLaunchTask);
    EXPECT_EQ(d.s().data["baseline"]["hbm"]["0"]["used_mb"], 2862);
    d.Succeed({{"runtime_dir", "/tmp/rt/" + d.s().run_id + "/service-1"}, {"pid", 5}, {"port", 18001}});
    d.Succeed(json::object());  // ready
    ASSERT_NE(d.Pending(kMemNpuSmiTask), nullptr);
    ASSERT_NE(d.Pending(kMemLogsTask), nullptr) << "the logs beside the after-ready snapshot";
    if (second_first) {
      d.Succeed({{"summary", json::object()}}, json::object(), kMemLogsTask);
      EXPECT_EQ(d.Pending(kMemInferTask), nullptr) << "not before the snapshot answered";
      d.Succeed({{"hbm", Hbm(50000)}}, json::object(), kMemNpuSmiTask);
    } else {
      d.Succeed({{"hbm", Hbm(50000)}}, json::object(), kMemNpuSmiTask);
      EXPECT_EQ(d.s().state, "vllm_log");
      EXPECT_EQ(d.Pending(kMemInferTask), nullptr) << "not before the logs answered";
      d.Succeed({{"summary", json::object()}}, json::object(), kMemLogsTask);
    }
    EXPECT_EQ(d.s().state, "inference");
    EXPECT_EQ(d.PendingKind(), kMemInferTask);
    int logs = 0;
    for (const auto& [id, t] : d.s().tasks) logs += t.kind == kMemLogsTask;
    EXPECT_EQ(logs, 1) << "the logs are read once";
    types.push_back(d.types());
    std::sort(types.back().begin(), types.back().end());
  }
  // The same events whichever answered first (the states an early step's
  // run passes through included): the crash matrix's positions count on it.
  EXPECT_EQ(types[0], types[1]);
}

// A failed run does not start the headers beside its cleanup stop.
TEST(MemoryMachine, AFailedRunsCleanupStopReadsNoHeaders) {
  Driver d("mp15");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/w"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  d.Succeed({{"runtime_dir", "/tmp/rt/mp15/service-1"}, {"pid", 5}, {"port", 18001}});
  d.Fail("never_ready", "no /health within 300 s");
  d.Succeed({{"summary", json::object()}});
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  EXPECT_EQ(d.Pending(kMemWeightsTask), nullptr);
  d.Succeed({{"stopped", true}});
  EXPECT_EQ(d.s().status, RunStatus::kFailed);
}

// vLLM refused to start because its KV cache would be negative: the headers
// and config are read after the stop (the advice predicts from them), and
// the manifest's advice has the finding.
TEST(MemoryMachine, ANegativeKvCacheRunReadsItsHeadersAfterTheStop) {
  Driver d("mp16");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/w"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  d.Succeed({{"runtime_dir", "/tmp/rt/mp16/service-1"}, {"pid", 5}, {"port", 18001}});
  d.Fail("service_exited", "the service exited before it was ready");
  d.Succeed({{"summary", {{"kv_cache_available_gib", -0.88}}}});
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  EXPECT_EQ(d.Pending(kMemWeightsTask), nullptr);
  d.Succeed({{"stopped", true}});
  ASSERT_EQ(d.PendingKind(), kMemWeightsTask);
  EXPECT_FALSE(d.s().terminal);
  d.Succeed({{"weights", nullptr}, {"theory", nullptr}, {"config", {{"num_hidden_layers", 4}}}});
  EXPECT_EQ(d.s().status, RunStatus::kFailed);
  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  ASSERT_EQ(m["advice"]["findings"].size(), 1u) << m["advice"].dump();
  EXPECT_EQ(m["advice"]["findings"][0]["rule"], "kv_cache_low");
}

TEST(MemoryMachine, ExportTimeoutReportsWhatExists) {
  Driver d("mp4");
  RunToFlushing(d, StandaloneSpec());
  ASSERT_EQ(d.PendingKind(), kMemWaitFlushTask);
  d.Succeed({{"signal", "timeout"}, {"flush_timed_out", true}, {"waited_ms", 300000}});
  ASSERT_EQ(d.PendingKind(), kMemExportTask);  // a flush timeout goes on with what exists
  ASSERT_TRUE(d.FireTimer("export_timeout"));
  EXPECT_EQ(d.PendingKind(), kMemCollectTask);
  d.Succeed({{"module_mem", json::array()}, {"npu_mem", json::array()}});
  EXPECT_EQ(d.s().status, RunStatus::kOk);
  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  EXPECT_EQ(m["report"]["msprof"]["status"], "export_timeout");
  EXPECT_EQ(m["msprof_flush"]["signal"], "timeout");
  EXPECT_EQ(m["msprof_flush"]["flush_timed_out"], true);
}

// Where msprof exported by itself, the flush wait's one command also
// answered for the export and the collection (issue 38): the run records all
// three from it, in the walk's order, and schedules neither task; the
// manifest reads as when the three ran apart.
TEST(MemoryMachine, AFlushWaitThatCollectedStandsForTheExportAndTheCollection) {
  Driver d("mp12");
  RunToFlushing(d, StandaloneSpec());
  ASSERT_EQ(d.PendingKind(), kMemWaitFlushTask);
  const json payload = d.Pending()->payload;
  ASSERT_TRUE(payload.contains("collect")) << payload.dump();
  EXPECT_EQ(payload["collect"]["msprof_dir"], payload["msprof_dir"]);
  EXPECT_EQ(payload["collect"]["step"], "msprof");
  const json collected = {
      {"csv_count", 2},
      {"module_mem", json::array({{{"file", "npu_module_mem_1.csv"}, {"component", "HCCL"}, {"device_id", 0},
                                   {"max_mb", 597.65625}, {"row", 2}}})},
      {"npu_mem", json::array()},
      {"__prof_device_map__", {{"npu_module_mem_1.csv", {0}}}}};
  d.Succeed({{"signal", "end_info"}, {"flush_timed_out", false}, {"waited_ms", 40}, {"polls", 1},
             {"exported", {{"status", "ok"}, {"already_exported", true}, {"prof_dirs", 1}, {"note", "1 PROF dir"}}},
             {"collected", collected}},
            {{"msprof_csvs/npu_module_mem_1.csv", "sha-c"}});
  EXPECT_EQ(d.Pending(), nullptr) << d.PendingKind();
  EXPECT_TRUE(d.s().terminal);
  EXPECT_EQ(d.s().status, RunStatus::kOk);
  for (const auto& [id, t] : d.s().tasks) EXPECT_NE(t.kind, kMemExportTask) << id;
  for (const auto& [id, t] : d.s().tasks) EXPECT_NE(t.kind, kMemCollectTask) << id;
  const auto& types = d.types();
  for (const char* t : {"MsprofFlushed", "MsprofExported", "MsprofCollected"})
    EXPECT_EQ(std::count(types.begin(), types.end(), t), 1) << t;
  const auto at = [&](const char* t) { return std::find(types.begin(), types.end(), t) - types.begin(); };
  EXPECT_LT(at("MsprofFlushed"), at("MsprofExported"));
  EXPECT_LT(at("MsprofExported"), at("MsprofCollected"));
  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  EXPECT_EQ(m["report"]["msprof"]["status"], "ok");
  EXPECT_EQ(m["msprof_flush"]["signal"], "end_info");
  EXPECT_FALSE(m["msprof_flush"].contains("collected")) << m["msprof_flush"].dump();
  EXPECT_EQ(m["files"]["msprof_csvs/npu_module_mem_1.csv"], "sha-c");
  EXPECT_EQ(m["report"]["devices"][0]["components"][4]["key"], "hccl");
  EXPECT_EQ(m["report"]["devices"][0]["components"][4]["evidence"][0]["blob"], "sha-c");
}

// A wait that did not collect (an export missing, a stream not read whole)
// leaves the export and the collection to their own tasks, as before.
TEST(MemoryMachine, AFlushWaitThatDidNotCollectLeavesBothStepsToTheirTasks) {
  Driver d("mp13");
  RunToFlushing(d, StandaloneSpec());
  d.Succeed({{"signal", "end_info"}, {"flush_timed_out", false}, {"waited_ms", 40}, {"polls", 1}});
  ASSERT_EQ(d.PendingKind(), kMemExportTask);
  d.Succeed({{"status", "ok"}, {"exit_code", 0}});
  ASSERT_EQ(d.PendingKind(), kMemCollectTask);
  d.Succeed({{"module_mem", json::array()}, {"npu_mem", json::array()}});
  EXPECT_EQ(d.s().status, RunStatus::kOk);
}

// A one-node run's graceful stop takes the flush wait with it (then_flush,
// issue 38): the stop's `flushed` answer is recorded where the walk reaches
// the wait (after the headers), as memory.wait_flush's would be, and no
// wait, export or collection task runs. A stop that did not answer for it
// leaves the wait to its task (the other tests); a run with a flush minimum,
// or a forced stop, asks for none.
TEST(MemoryMachine, TheStopAnswersForTheFlushWaitWhenItTookIt) {
  Driver d("mp31");
  RunToTheStop(d, StandaloneSpec(), {{"stdout_log", "/tmp/rt/mp31/service-1/stdout.log"}});
  ASSERT_NE(d.Pending(kServiceStopTask), nullptr);
  const json then = d.Pending(kServiceStopTask)->payload["then_flush"];
  ASSERT_TRUE(then.is_object()) << d.Pending(kServiceStopTask)->payload.dump();
  EXPECT_EQ(then["msprof_dir"], "/tmp/rt/mp31/service-1/msprof_data");
  EXPECT_EQ(then["pid"], 5);
  EXPECT_EQ(then["stdout_log"], "/tmp/rt/mp31/service-1/stdout.log");
  EXPECT_EQ(then["timeout_s"], 300);
  EXPECT_EQ(then["collect"]["step"], "msprof");
  // The deadline leaves room for the stop's graces (30 s each) before the wait's own 300 s.
  EXPECT_GE(then["deadline_ms"].get<int64_t>(), 1000 + (300 + 60) * 1000);
  const json collected = {
      {"csv_count", 2},
      {"module_mem", json::array({{{"file", "npu_module_mem_1.csv"}, {"component", "HCCL"}, {"device_id", 0},
                                   {"max_mb", 597.65625}, {"row", 2}}})},
      {"npu_mem", json::array()},
      {"__prof_device_map__", {{"npu_module_mem_1.csv", {0}}}}};
  d.Succeed({{"stopped", true},
             {"signals", {"SIGINT"}},
             {"flushed", {{"signal", "end_info"}, {"flush_timed_out", false}, {"waited_ms", 3}, {"polls", 1},
                          {"exported", {{"status", "ok"}, {"already_exported", true}, {"prof_dirs", 1}}},
                          {"collected", collected}}}},
            {{"msprof_csvs/npu_module_mem_1.csv", "sha-c"}, {"stderr.log", "sha-e"}}, kServiceStopTask);
  EXPECT_FALSE(d.s().data["stopped"].contains("flushed")) << "the stop's record is the stop's";
  EXPECT_EQ(d.s().state, "weights") << "the headers first";
  EXPECT_FALSE(d.s().data.contains("flushed"));
  d.Succeed({{"weights", nullptr}}, json::object(), kMemWeightsTask);
  EXPECT_TRUE(d.s().terminal);
  EXPECT_EQ(d.s().status, RunStatus::kOk) << d.s().error;
  for (const auto& [id, t] : d.s().tasks)
    for (const char* k : {kMemWaitFlushTask, kMemExportTask, kMemCollectTask}) EXPECT_NE(t.kind, k) << id;
  EXPECT_EQ(d.s().data["flushed"]["signal"], "end_info");
  EXPECT_EQ(d.s().data["flushed"]["min_wait_s"], 0);
  const auto& types = d.types();
  const auto at = [&](const char* t) { return std::find(types.begin(), types.end(), t) - types.begin(); };
  ASSERT_LT(at("ModelConfigRead"), types.size());  // the headers' answer
  EXPECT_LT(at("ServiceStopped"), at("ModelConfigRead"));
  EXPECT_LT(at("ModelConfigRead"), at("MsprofFlushed"));
  EXPECT_LT(at("MsprofFlushed"), at("MsprofExported"));
  EXPECT_LT(at("MsprofExported"), at("MsprofCollected"));
  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  EXPECT_EQ(m["report"]["msprof"]["status"], "ok");
  EXPECT_EQ(m["msprof_flush"]["signal"], "end_info");
  EXPECT_EQ(m["files"]["msprof_csvs/npu_module_mem_1.csv"], "sha-c");
  EXPECT_EQ(m["report"]["devices"][0]["components"][4]["evidence"][0]["blob"], "sha-c");

  // A flush minimum is waited out first: the stop takes no wait.
  Driver min("mp32");
  json spec = StandaloneSpec();
  spec["flush_s"] = 2;
  RunToTheStop(min, spec);
  ASSERT_NE(min.Pending(kServiceStopTask), nullptr);
  EXPECT_FALSE(min.Pending(kServiceStopTask)->payload.contains("then_flush"));
}

// The readiness wait takes the after-ready snapshot and the log read with it
// (ServiceWaitReady.then_snapshot / then_logs, issue 38): its answer's parts
// are recorded as memory.npu_smi's and memory.logs' would be, in the walk's
// order, and the inference is scheduled with the wait's answer. A part the
// wait did not answer is left to its task.
TEST(MemoryMachine, TheReadinessWaitAnswersForTheAfterReadySnapshotAndTheLogs) {
  Driver d("mp41");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/w"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  d.Succeed({{"runtime_dir", "/tmp/rt/mp41/service-1"}, {"pid", 5}, {"port", 18001},
             {"stdout_log", "/tmp/rt/mp41/service-1/stdout.log"}, {"stderr_log", "/tmp/rt/mp41/service-1/stderr.log"}});
  ASSERT_NE(d.Pending(kServiceWaitReadyTask), nullptr);
  const json& wait = d.Pending(kServiceWaitReadyTask)->payload;
  ASSERT_TRUE(wait.contains("then_snapshot")) << wait.dump();
  EXPECT_EQ(wait["then_snapshot"]["phase"], "after_ready");
  EXPECT_EQ(wait["then_logs"]["stdout_log"], "/tmp/rt/mp41/service-1/stdout.log");
  EXPECT_EQ(wait["then_logs"]["stderr_log"], "/tmp/rt/mp41/service-1/stderr.log");
  const size_t before = d.types().size();
  d.Succeed({{"ready_after_ms", 900},
             {"rounds", 1},
             {"then_ms", 40},
             {"after_ready", {{"phase", "after_ready"}, {"hbm", Hbm(50000)}, {"device_count", 1}}},
             {"vllm_log", {{"summary", {{"kv_cache_available_gib", 12.5}}}, {"bytes", 321}}}},
            {{"after_ready_npu_smi.txt", "sha-a"}, {"vllm_serve.log", "sha-l"}}, kServiceWaitReadyTask);
  EXPECT_EQ(d.PendingKind(), kMemInferTask) << "the inference comes with the wait's answer";
  EXPECT_EQ(d.s().state, "inference");
  EXPECT_FALSE(d.s().data["ready"].contains("after_ready")) << "the wait's record is the wait's";
  EXPECT_FALSE(d.s().data["ready"].contains("vllm_log"));
  EXPECT_FALSE(d.s().data["ready"].contains("then_ms"));
  EXPECT_EQ(d.s().data["after_ready"]["blob"], "sha-a");
  EXPECT_EQ(d.s().data["after_ready"]["hbm"], Hbm(50000));
  EXPECT_EQ(d.s().data["vllm_log"]["blob"], "sha-l");
  EXPECT_EQ(d.s().data["vllm_log"]["bytes"], 321);
  const std::vector<std::string> after(d.types().begin() + static_cast<long>(before), d.types().end());
  const auto at = [&](const char* t) { return std::find(after.begin(), after.end(), t) - after.begin(); };
  ASSERT_LT(at("AfterReadyRecorded"), after.size());
  EXPECT_LT(at("ServiceReady"), at("AfterReadyRecorded"));
  EXPECT_LT(at("VllmLogRead"), after.size());
  EXPECT_LT(at("AfterReadyRecorded"), at("TaskScheduled"));
  // The rest of the run as before; no memory.logs and no after-ready memory.npu_smi ran.
  d.Succeed({{"ok", true}});
  d.Succeed({{"hbm", Hbm(50100)}});
  EXPECT_EQ(d.s().state, "stopped");
  int snapshots = 0;
  for (const auto& [id, t] : d.s().tasks) {
    EXPECT_NE(t.kind, kMemLogsTask) << id;
    if (t.kind == kMemNpuSmiTask) ++snapshots;
  }
  EXPECT_EQ(snapshots, 2) << "baseline and after_infer only";
  // The ready instant: the answer's, less the parts' time.
  EXPECT_GT(d.s().data["ready"]["server_answered_ms"].get<int64_t>(), 0);

  // A wait that answered without the logs: the log read runs as its own task.
  Driver half("mp42");
  half.Submit(StandaloneSpec());
  half.Succeed({{"wrap_script", "/w"}});
  half.Succeed({{"hbm", Hbm(2862)}});
  half.Succeed({{"runtime_dir", "/tmp/rt/mp42/service-1"}, {"pid", 5}, {"port", 18001}});
  half.Succeed({{"after_ready", {{"phase", "after_ready"}, {"hbm", Hbm(50000)}, {"device_count", 1}}}},
               {{"after_ready_npu_smi.txt", "sha-a"}}, kServiceWaitReadyTask);
  EXPECT_EQ(half.PendingKind(), kMemLogsTask);
  EXPECT_EQ(half.s().data["after_ready"]["blob"], "sha-a");
  half.Succeed({{"summary", json::object()}});
  EXPECT_EQ(half.PendingKind(), kMemInferTask);

  // A wait that answered with neither: both tasks as before.
  Driver none("mp43");
  none.Submit(StandaloneSpec());
  none.Succeed({{"wrap_script", "/w"}});
  none.Succeed({{"hbm", Hbm(2862)}});
  none.Succeed({{"runtime_dir", "/tmp/rt/mp43/service-1"}, {"pid", 5}, {"port", 18001}});
  none.Succeed(json::object(), json::object(), kServiceWaitReadyTask);
  EXPECT_NE(none.Pending(kMemNpuSmiTask), nullptr);
  EXPECT_NE(none.Pending(kMemLogsTask), nullptr);
}

TEST(MemoryMachine, FlushSecondsIsAMinimumThenTheWaitAndAFailedWaitGoesOn) {
  Driver d("mp9");
  json spec = StandaloneSpec();
  spec["flush_s"] = 2;
  RunToFlushing(d, spec);
  EXPECT_EQ(d.Pending(), nullptr);  // the minimum first
  ASSERT_TRUE(d.FireTimer("flush"));
  ASSERT_EQ(d.PendingKind(), kMemWaitFlushTask);
  d.Fail("remote_error", "the target went away");
  ASSERT_EQ(d.PendingKind(), kMemExportTask);  // not a critical step: the export judges what exists
  EXPECT_TRUE(d.s().data["step_failures"].contains("flushed"));
}

TEST(MemoryMachine, CancelAfterLaunchStopsTheService) {
  Driver d("mp5");
  d.Submit(StandaloneSpec());
  d.Succeed({{"wrap_script", "/w"}});
  d.Succeed({{"hbm", Hbm(2862)}});
  d.Succeed({{"runtime_dir", "/tmp/rt/mp5/service-1"}, {"pid", 5}, {"port", 18001}});
  Input in;
  in.type = Input::Type::kCancel;
  in.now_ms = 999999;
  d.Feed(in);
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  EXPECT_EQ(d.Pending()->payload["force"], true);
  d.Succeed({{"stopped", true}});
  EXPECT_EQ(d.s().status, RunStatus::kCancelled);
}

// A run whose data cannot be read (a store written with another schema): a
// decision on it fails its input, and the cancel the broker then sends still
// stops the service the launch started (forced, at the launch's runtime dir
// and pid) and ends the run, where it used to hang on the same failing read.
TEST(MemoryMachine, ACancelOfARunWhoseDataCannotBeReadStillStopsItsServiceAndEnds) {
  for (const bool stop_fails : {false, true}) {
    Driver d("mp12");
    d.Submit(StandaloneSpec());
    d.Succeed({{"wrap_script", "/w"}});
    d.Succeed({{"hbm", Hbm(2862)}});
    d.Succeed({{"runtime_dir", "/tmp/rt/mp12/service-1"}, {"pid", 5}, {"port", 18001}});
    ASSERT_EQ(d.PendingKind(), kServiceWaitReadyTask);
    d.Edit().data["preflight"]["msprof_mem_freq"] = "often";  // no longer an integer
    Input in;
    in.type = Input::Type::kCancel;
    in.now_ms = 999999;
    d.Feed(in);
    ASSERT_EQ(d.PendingKind(), kServiceStopTask);
    EXPECT_EQ(d.s().state, "stopped");
    EXPECT_EQ(d.Pending()->payload["force"], true);
    EXPECT_EQ(d.Pending()->payload["pid"], 5);
    EXPECT_EQ(d.Pending()->payload["runtime_dir"], "/tmp/rt/mp12/service-1");
    if (stop_fails)
      d.Fail("ssh_failed", "connection reset");  // a stop that fails is not tried again and again
    else
      d.Succeed({{"stopped", true}});
    EXPECT_TRUE(d.s().terminal);
    EXPECT_EQ(d.s().status, RunStatus::kCancelled);
    EXPECT_NE(d.s().error.find("msprof_mem_freq"), std::string::npos) << d.s().error;
    int stops = 0;
    for (const auto& [id, t] : d.s().tasks) stops += t.kind == kServiceStopTask;
    EXPECT_EQ(stops, 1);
  }
}

json AttachSpec(bool wrapped, bool ended) {
  json svc = {{"model", "/models/m"}, {"served_model_name", "m"}, {"tp", 2}, {"dp", 1}, {"devices", {0, 1}},
              {"port", 18002}, {"pid", 99}, {"runtime_dir", "/tmp/rt/s1/service-1"},
              {"stdout_log", "/tmp/rt/s1/service-1/stdout.log"}, {"stderr_log", "/tmp/rt/s1/service-1/stderr.log"},
              {"wrap_script", wrapped ? json("/tmp/rt/w/msprof_wrap.sh") : json(nullptr)},
              {"extra_args", json::array()}};
  return {{"mode", "attach"}, {"attach_run", "s1"}, {"machine", "m1"}, {"machine_record", Machine()},
          {"attach_run_record", {{"kind", "serve"}, {"service", svc}, {"status", ended ? "ok" : "running"},
                                 {"finished_at", ended ? json("2026-01-01T00:00:00Z") : json(nullptr)}}}};
}

TEST(MemoryMachine, AttachLiveThenContinuesWhenTheServeRunEnds) {
  Driver d("mp6");
  d.Submit(AttachSpec(true, false));
  ASSERT_EQ(d.s().watching.size(), 1u);
  EXPECT_EQ(d.PendingKind(), kServiceWaitReadyTask);
  d.Succeed(json::object());
  d.Succeed({{"hbm", Hbm(50000)}});
  d.Succeed({{"summary", json::object()}});
  d.Succeed({{"ok", true}});
  d.Succeed({{"hbm", Hbm(50100)}});
  ASSERT_EQ(d.PendingKind(), kMemWeightsTask);
  d.Succeed({{"weights", nullptr}});
  EXPECT_EQ(d.s().state, "awaiting_service_stop");
  for (const auto& [id, t] : d.s().tasks) EXPECT_NE(t.kind, kServiceStopTask);  // never stops it
  d.Signal("watched_run_finished", {{"run_id", "s1"}, {"status", "ok"}, {"state", "completed"}});
  ASSERT_EQ(d.PendingKind(), kMemWaitFlushTask);
  EXPECT_EQ(d.Pending()->payload["pid"], 99);  // the attached service's group
  d.Succeed({{"signal", "end_info"}, {"flush_timed_out", false}, {"waited_ms", 30}});
  ASSERT_EQ(d.PendingKind(), kMemExportTask);
  EXPECT_EQ(d.Pending()->payload["msprof_dir"], "/tmp/rt/s1/service-1/msprof_data");
  d.Succeed({{"status", "ok"}});
  d.Succeed({{"module_mem", json::array()}, {"npu_mem", json::array()}});
  EXPECT_EQ(d.s().status, RunStatus::kOk);
  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  EXPECT_TRUE(m["baseline_hbm"].is_null());
  EXPECT_EQ(m["mode"], "attach");
}

// The attached service's record is read as its message: a value of the
// wrong type is an error naming the key (the broker then refuses the
// submission), never a silent default that would wait on no pid.
TEST(MemoryMachine, AnAttachedRecordOfTheWrongTypeIsNamedNotReadAsADefault) {
  json spec = AttachSpec(true, false);
  spec["attach_run_record"]["service"]["pid"] = "ninety-nine";
  RunState s;
  s.run_id = "mp11";
  Input in;
  in.type = Input::Type::kSubmit;
  in.kind = "memory-profile";
  in.spec = spec;
  in.now_ms = 1000;
  try {
    (void)Decide(DefaultKinds(), s, in);
    ADD_FAILURE() << "a pid that is text was read";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("pid"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("service record"), std::string::npos) << e.what();
  }
  spec["attach_run_record"]["service"]["pid"] = 99;
  in.spec = spec;
  const auto decided = Decide(DefaultKinds(), s, in);
  ASSERT_TRUE(decided.ok()) << decided.status().ToString();
}

TEST(MemoryMachine, AttachUnwrappedFinishesWithoutMsprof) {
  Driver d("mp7");
  d.Submit(AttachSpec(false, true));
  EXPECT_EQ(d.PendingKind(), kMemLogsTask);
  d.Succeed({{"summary", json::object()}});
  d.Succeed({{"weights", nullptr}});
  EXPECT_EQ(d.s().status, RunStatus::kOk);
  const json m = DefaultKinds().Find("memory-profile")->Manifest(d.s());
  EXPECT_EQ(m["report"]["msprof"]["status"], "not_wrapped");
}

TEST(MemoryMachine, GracefulStopThatLeavesTheServiceRunningEscalatesToForce) {
  Driver d("mp8");
  RunToTheStop(d, StandaloneSpec());
  ASSERT_EQ(d.PendingKind(), kServiceStopTask);
  EXPECT_EQ(d.Pending()->payload["force"], false);
  EXPECT_EQ(d.Pending()->payload["grace_s"], 30);
  ASSERT_NE(d.Pending(kMemWeightsTask), nullptr) << "the headers are read beside the stop";
  d.Fail("still_running", "pid 5 is still running after SIGINT and SIGTERM");
  ASSERT_NE(d.Pending(kServiceStopTask), nullptr) << "the escalation does not wait for the headers";
  EXPECT_EQ(d.Pending(kServiceStopTask)->payload["force"], true);
  EXPECT_FALSE(d.Pending(kServiceStopTask)->payload.contains("then_flush")) << "a forced stop takes no flush wait";
  EXPECT_EQ(d.Pending(kServiceStopTask)->payload.value("kill_at_once", false), true)
      << "SIGINT and SIGTERM were waited out already";
  d.Succeed({{"stopped", true}}, json::object(), kServiceStopTask);
  EXPECT_EQ(d.s().state, "weights") << "the walk waits for the headers where their step comes";
  EXPECT_EQ(d.PendingKind(), kMemWeightsTask);
  int weights_tasks = 0;
  for (const auto& [id, t] : d.s().tasks) weights_tasks += t.kind == kMemWeightsTask;
  EXPECT_EQ(weights_tasks, 1) << "read once, not again with the forced stop";
  d.Succeed({{"weights", nullptr}});
  EXPECT_EQ(d.s().state, "flushed");
  EXPECT_FALSE(d.s().data.contains("failure"));
}

// The service record the summary shows moves on with the run's own steps:
// "starting" at launch, "ready" once ready, then what the stop answered; a
// stop answer that does not say reads as stopped, one that says the service
// is still there as failed (and fails the run).
TEST(MemoryMachine, TheServiceStatusFollowsTheStepsAndTheStopsAnswer) {
  for (const json& stop_answer : {json::object(), json{{"stopped", true}}, json{{"stopped", false}}}) {
    Driver d("mp10");
    d.Submit(StandaloneSpec());
    const auto& kind = *DefaultKinds().Find("memory-profile");
    EXPECT_TRUE(kind.Summary(d.s())["service"].is_null()) << "nothing launched yet";
    d.Succeed({{"wrap_script", "/w"}});
    d.Succeed({{"hbm", Hbm(2862)}});
    d.Succeed({{"runtime_dir", "/tmp/rt/mp10/service-1"}, {"pid", 5}, {"port", 18001}});
    EXPECT_EQ(kind.Summary(d.s())["service"]["status"], "starting");
    d.Succeed(json::object());
    EXPECT_EQ(kind.Summary(d.s())["service"]["status"], "ready");
    d.Succeed({{"hbm", Hbm(50000)}});
    d.Succeed({{"summary", json::object()}});
    d.Succeed({{"ok", true}});
    d.Succeed({{"hbm", Hbm(50100)}});
    ASSERT_EQ(d.PendingKind(), kServiceStopTask);
    d.Succeed(stop_answer);
    const bool still_there = stop_answer.contains("stopped") && !stop_answer["stopped"].get<bool>();
    EXPECT_EQ(kind.Summary(d.s())["service"]["status"], still_there ? "failed" : "stopped") << stop_answer;
    EXPECT_EQ(d.s().data.contains("failure"), still_there) << stop_answer;
    if (still_there) {
      EXPECT_FALSE(d.s().terminal) << "a run ends after every task it scheduled: the headers read beside the stop";
      ASSERT_EQ(d.PendingKind(), kMemWeightsTask);
      d.Succeed({{"weights", nullptr}});
      EXPECT_EQ(d.s().status, RunStatus::kFailed);
      EXPECT_NE(d.s().error.find("could not be stopped"), std::string::npos) << d.s().error;
    } else {
      EXPECT_EQ(d.PendingKind(), kMemWeightsTask) << stop_answer;
    }
  }
}

TEST(MemoryMachine, TransitionsOnlyGoForward) {
  const auto& t = DefaultKinds().Find("memory-profile")->transitions();
  EXPECT_TRUE(t.Allowed("preflight", "baseline"));
  EXPECT_TRUE(t.Allowed("ready", "vllm_log"));
  EXPECT_FALSE(t.Allowed("stopped", "service"));
  EXPECT_FALSE(t.Allowed("completed", "export"));
  EXPECT_TRUE(t.IsTerminal("failed"));
}

}  // namespace
}  // namespace npuprof::sm
