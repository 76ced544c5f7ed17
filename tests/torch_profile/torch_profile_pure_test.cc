// Pure tests of the torch-profile / analyse-root run kinds: spec validation,
// serve args, gates, the transition table, whole flows driven through the
// engine with invented task results, and the manifest field list.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include "tests/support/lease_inputs.h"
#include "statemachine/engine.h"
#include "statemachine/kind_schemas.h"
#include "statemachine/message_json.h"
#include "statemachine/torch_profile_gates.h"
#include "statemachine/torch_profile_manifest.h"
#include "statemachine/torch_profile_spec.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {
namespace {

json MachineRecord() {
  return {{"name", "m1"}, {"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}, {"runtime_base", "/rt"}};
}

json BaseSpec() {
  return {{"machine", "m1"},          {"machine_record", MachineRecord()},
          {"model", "/models/qwen"},  {"served_model_name", "qwen"},
          {"tp", 2},                  {"tag", "case-1"},
          {"mode", "enforce_eager"},  {"request_kind", "text"},
          {"benchmark_output_tokens", 8}};
}

std::string Validate(json spec) {
  Status s = ValidateTorchProfileSpec(spec);
  return s.ok() ? "" : s.message();
}

TEST(TorchProfileSpec, DefaultsFilled) {
  json spec = BaseSpec();
  ASSERT_TRUE(ValidateTorchProfileSpec(spec).ok());
  EXPECT_EQ(spec["dp"], 1);
  EXPECT_EQ(spec["speculative_tokens"], 0);
  EXPECT_EQ(spec["speculative_method"], "qwen3_5_mtp");
  EXPECT_DOUBLE_EQ(spec["gpu_memory_utilization"].get<double>(), 0.85);
  EXPECT_EQ(spec["max_model_len"], 4096);
  EXPECT_EQ(spec["max_num_seqs"], 2);
  EXPECT_EQ(spec["max_num_batched_tokens"], 1024);
  EXPECT_TRUE(spec["api_server_count"].is_null());
  EXPECT_EQ(spec["prompt_tokens"], 2000);
  EXPECT_EQ(spec["followup_output_tokens"], 5);
  EXPECT_EQ(spec["benchmark_total_requests"], 10);
  EXPECT_EQ(spec["benchmark_concurrency"], 5);
  EXPECT_DOUBLE_EQ(spec["benchmark_success_threshold"].get<double>(), 0.8);
  EXPECT_EQ(spec["request_timeout"], 900);
  EXPECT_EQ(spec["profile_control_timeout"], 600);
  EXPECT_EQ(spec["torch_profiler_dir"], "vllm_profile");
  EXPECT_EQ(spec["torch_profiler_with_stack"], false);
  EXPECT_EQ(spec["image_height"], 480);
  EXPECT_EQ(spec["flush_seconds"], 0);
  EXPECT_EQ(spec["flush_timeout"], 300);
  auto typed = DecodeRunSpec("torch-profile", spec);
  ASSERT_TRUE(typed.ok() && *typed) << typed.status().message();
  EXPECT_EQ(ExpectedRanks(dynamic_cast<const run_specs::TorchProfileSpec&>(**typed)), 2);
}

TEST(TorchProfileSpec, RefusalsNameTheField) {
  struct Case { const char* field; json value; const char* expect; };
  const std::vector<Case> cases = {
      {"mode", "graph", "mode"},
      {"tp", 0, "tp"},
      {"benchmark_success_threshold", 1.5, "benchmark_success_threshold"},
      {"benchmark_success_threshold", -0.1, "benchmark_success_threshold"},
      {"tag", "bad tag;rm", "tag"},
      {"request_kind", "audio", "request_kind"},
      {"torch_profiler_dir", "../x", "torch_profiler_dir"},
      {"torch_profiler_dir", "/abs", "torch_profiler_dir"},
      {"model", "relative/path", "model"},
      {"served_model_name", "a b", "served_model_name"},
      {"gpu_memory_utilization", 0, "gpu_memory_utilization"},
      {"speculative_method", "x;y", "speculative_method"},
      {"benchmark_concurrency", 0, "benchmark_concurrency"},
  };
  for (const auto& c : cases) {
    json spec = BaseSpec();
    spec[c.field] = c.value;
    const std::string err = Validate(spec);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.field << " -> '" << err << "'";
  }
  for (const char* f : {"model", "served_model_name", "tp", "tag", "mode", "request_kind", "benchmark_output_tokens"}) {
    json spec = BaseSpec();
    spec.erase(f);
    EXPECT_NE(Validate(spec).find(f), std::string::npos) << f;
  }
  json vl = BaseSpec();
  vl["request_kind"] = "vl";
  EXPECT_NE(Validate(vl).find("image_path"), std::string::npos);
  vl["image_path"] = "/tmp/x.png";
  EXPECT_EQ(Validate(vl), "");
  json edge = BaseSpec();
  edge["benchmark_success_threshold"] = 0;
  EXPECT_EQ(Validate(edge), "");
  edge["benchmark_success_threshold"] = 1;
  EXPECT_EQ(Validate(edge), "");
}

// A validated spec as the message the fold keeps (typed_spec.h).
run_specs::TorchProfileSpec Typed(json spec) {
  EXPECT_TRUE(ValidateTorchProfileSpec(spec).ok());
  auto decoded = DecodeRunSpec("torch-profile", spec);
  EXPECT_TRUE(decoded.ok()) << decoded.status().message();
  run_specs::TorchProfileSpec out;
  if (decoded.ok() && *decoded) out.CopyFrom(**decoded);
  return out;
}

std::vector<std::string> Args(json spec) { return TorchProfileServeArgs(Typed(std::move(spec))); }

bool Has(const std::vector<std::string>& a, const std::string& flag, const std::string& value = "") {
  auto it = std::find(a.begin(), a.end(), flag);
  if (it == a.end()) return false;
  return value.empty() || (it + 1 != a.end() && *(it + 1) == value);
}

TEST(TorchProfileSpec, ServeArgsPerMode) {
  json spec = BaseSpec();
  auto eager = Args(spec);
  EXPECT_TRUE(Has(eager, "--enforce-eager"));
  EXPECT_FALSE(Has(eager, "--compilation-config"));
  EXPECT_TRUE(Has(eager, "--max-model-len", "4096"));
  EXPECT_TRUE(Has(eager, "--trust-remote-code"));
  EXPECT_TRUE(Has(eager, "--gpu-memory-utilization", "0.85"));
  EXPECT_TRUE(Has(eager, "--max-num-seqs", "2"));
  EXPECT_TRUE(Has(eager, "--max-num-batched-tokens", "1024"));
  EXPECT_TRUE(Has(eager, "--profiler-config",
                  R"({"profiler":"torch","torch_profiler_dir":"./vllm_profile","torch_profiler_with_stack":false})"));
  EXPECT_FALSE(Has(eager, "--speculative-config"));
  EXPECT_FALSE(Has(eager, "--enable-expert-parallel"));
  EXPECT_FALSE(Has(eager, "--api-server-count"));

  spec["mode"] = "full_decode_only";
  EXPECT_TRUE(Has(Args(spec), "--compilation-config", R"({"cudagraph_mode":"FULL_DECODE_ONLY"})"));
  spec["mode"] = "piecewise_graph";
  auto pw = Args(spec);
  EXPECT_TRUE(Has(pw, "--compilation-config", R"({"cudagraph_mode":"PIECEWISE"})"));
  EXPECT_FALSE(Has(pw, "--enforce-eager"));

  spec["speculative_tokens"] = 2;
  spec["enable_expert_parallel"] = true;
  spec["api_server_count"] = 2;
  spec["torch_profiler_with_stack"] = true;
  auto more = Args(spec);
  EXPECT_TRUE(Has(more, "--speculative-config", R"({"method":"qwen3_5_mtp","num_speculative_tokens":2})"));
  EXPECT_TRUE(Has(more, "--enable-expert-parallel"));
  EXPECT_TRUE(Has(more, "--api-server-count", "2"));
  json payload = MessageToJson(TorchProfileLaunchPayload("r1", Typed(spec)));
  EXPECT_EQ(payload["run_id"], "r1");
  EXPECT_EQ(payload["extra_args"][0], "--max-model-len");
  EXPECT_EQ(payload["env"]["PYTORCH_NPU_ALLOC_CONF"], "expandable_segments:True");
}

// A requests task's result with one request per flag (true = a 2xx answer).
results::TorchProfileRequestsResult Requests(std::initializer_list<bool> oks) {
  results::TorchProfileRequestsResult r;
  for (bool ok : oks) r.add_results()->set_ok(ok);
  return r;
}

TEST(TorchProfileGates, Workload) {
  EXPECT_EQ(WorkloadGate(Requests({true, true}), Requests({false}), 0.8)["status"], "followup_failed");
  EXPECT_EQ(WorkloadGate(Requests({true}), Requests({}), 0.8)["status"], "followup_failed") << "none sent";
  EXPECT_EQ(WorkloadGate(Requests({}), Requests({true}), 0.8)["status"], "no_benchmark_requests");
  EXPECT_EQ(WorkloadGate(Requests({true, false, true, false}), Requests({true}), 0.8)["status"],
            "benchmark_below_threshold");
  const json at = WorkloadGate(Requests({true, true, true, true, false}), Requests({true}), 0.8);
  EXPECT_EQ(at["status"], "ok");
  EXPECT_EQ(at["bench_total"], 5);
  EXPECT_EQ(at["bench_ok"], 4);
  EXPECT_DOUBLE_EQ(at["bench_success_rate"].get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(at["bench_threshold"].get<double>(), 0.8);
  EXPECT_EQ(at["followup_ok"], true);
  // followup checked first even when the wave is empty
  EXPECT_EQ(WorkloadGate(Requests({}), Requests({false}), 0.8)["status"], "followup_failed");
  // Only the follow-up's first request decides it, as the gate promises.
  EXPECT_EQ(WorkloadGate(Requests({true}), Requests({true, false}), 0.8)["followup_ok"], true);
  EXPECT_EQ(WorkloadGate(Requests({true}), Requests({false, true}), 0.8)["followup_ok"], false);
}

TEST(TorchProfileGates, AnalysisWorstFirst) {
  EXPECT_EQ(RankAnalysisStatus(false, true), "missing_kernel_details");
  EXPECT_EQ(RankAnalysisStatus(false, false), "missing_kernel_details");
  EXPECT_EQ(RankAnalysisStatus(true, false), "partial");
  EXPECT_EQ(RankAnalysisStatus(true, true), "ok");
  EXPECT_EQ(AnalysisGate({}, 2), "no_profile_dirs");
  EXPECT_EQ(AnalysisGate({"ok", "missing_kernel_details"}, 2), "missing_kernel_details");
  EXPECT_EQ(AnalysisGate({"missing_kernel_details"}, 2), "missing_kernel_details");
  EXPECT_EQ(AnalysisGate({"ok"}, 2), "rank_count_mismatch");
  EXPECT_EQ(AnalysisGate({"partial"}, 2), "rank_count_mismatch");
  EXPECT_EQ(AnalysisGate({"ok", "partial"}, 2), "partial");
  EXPECT_EQ(AnalysisGate({"ok", "ok"}, 2), "ok");
  EXPECT_EQ(GateError("ok", "ok"), "");
  EXPECT_EQ(GateError("followup_failed", "partial"),
            "workload gate: followup_failed; analysis gate: partial; re-collect required");
}

TEST(TorchProfileTransitions, Table) {
  const RunKind* k = DefaultKinds().Find("torch-profile");
  ASSERT_NE(k, nullptr);
  const auto& t = k->transitions();
  const std::vector<std::pair<std::string, std::string>> legal = {
      {"queued", "launching"},          {"launching", "ready"},       {"ready", "profiling"},
      {"profiling", "workload"},        {"workload", "stopping_profile"}, {"stopping_profile", "flush"},
      {"flush", "stopping_service"},    {"stopping_service", "analysing"}, {"analysing", "completed"},
      {"analysing", "failed"},          {"workload", "stopping_service"}, {"stopping_service", "cancelled"},
      {"queued", "preparing_image"},    {"preparing_image", "launching"}};
  for (const auto& [a, b] : legal) EXPECT_TRUE(t.Allowed(a, b)) << a << "->" << b;
  const std::vector<std::pair<std::string, std::string>> illegal = {
      {"queued", "completed"},       {"launching", "completed"},  {"workload", "completed"},
      {"workload", "cancelled"},     {"profiling", "failed"},     {"stopping_service", "completed"},
      {"completed", "launching"},    {"failed", "stopping_service"}, {"analysing", "launching"},
      {"flush", "analysing"}};
  for (const auto& [a, b] : illegal) EXPECT_FALSE(t.Allowed(a, b)) << a << "->" << b;
  for (const char* s : {"completed", "failed", "cancelled"}) EXPECT_TRUE(t.IsTerminal(s));
  const RunKind* ar = DefaultKinds().Find("analyse-root");
  ASSERT_NE(ar, nullptr);
  EXPECT_TRUE(ar->transitions().Allowed("analysing", "completed"));
  EXPECT_FALSE(ar->transitions().Allowed("queued", "completed"));
}

// Drives one run through the engine.
class Flow {
 public:
  explicit Flow(const std::string& kind = "torch-profile") : kind_(kind) { s_.run_id = "r1"; }

  std::string Submit(json spec) {
    Input in;
    in.type = Input::Type::kSubmit;
    in.kind = kind_;
    in.spec = std::move(spec);
    std::string err = Feed(in);
    while (err.empty())
      if (auto lease = npuprof::sm::testing::NextLeaseInput(s_)) err = Feed(*lease);
      else break;
    return err;
  }
  // Result for the in-flight task of `kind` (optionally payload.role == role).
  std::string Result(const std::string& kind, json result, const std::string& role = "", bool ok = true,
                     const std::string& error_kind = "") {
    const TaskInfo* t = Pending(kind, role);
    if (!t) return "no pending task " + kind + " " + role;
    Input in;
    in.type = Input::Type::kTaskResult;
    in.task_id = t->task_id;
    in.attempt = t->attempt;
    in.ok = ok;
    in.result = std::move(result);
    in.error_kind = error_kind;
    in.error = ok ? "" : error_kind + " happened";
    return Feed(in);
  }
  std::string FireTimer(const std::string& purpose) {
    for (const auto& [id, t] : s_.timers)
      if (t.armed && t.purpose == purpose) {
        Input in;
        in.type = Input::Type::kTimerFired;
        in.timer_id = id;
        in.now_ms = t.deadline_ms;
        return Feed(in);
      }
    return "no timer " + purpose;
  }
  std::string Cancel() {
    Input in;
    in.type = Input::Type::kCancel;
    return Feed(in);
  }
  const TaskInfo* Pending(const std::string& kind, const std::string& role = "") const {
    const TaskInfo* found = nullptr;
    for (const auto& [id, t] : s_.tasks)
      if (t.kind == kind && t.in_flight() && (role.empty() || t.payload.value("role", "") == role)) found = &t;
    return found;
  }
  int PendingCount(const std::string& kind) const {
    int n = 0;
    for (const auto& [id, t] : s_.tasks) n += (t.kind == kind && t.in_flight());
    return n;
  }
  const RunState& state() const { return s_; }
  json Manifest() const { return DefaultKinds().Find(kind_)->Manifest(s_); }

 private:
  std::string Feed(Input in) {
    in.now_ms = in.now_ms ? in.now_ms : (now_ += 1000);
    auto evs = Decide(DefaultKinds(), s_, in);
    if (!evs.ok()) return evs.status().message();
    for (const auto& e : *evs) Apply(DefaultKinds(), s_, e.type, e.payload, s_.last_seq + 1, in.now_ms);
    return "";
  }
  std::string kind_;
  RunState s_;
  int64_t now_ = 1700000000000;
};

json Launched() { return {{"runtime_dir", "/rt/svc-1"}, {"pid", 4242}, {"port", 18000}, {"adopted", false}}; }
json RankOk(const std::string& dir) {
  return {{"path", dir},
          {"outputs", {{"kernel_details_csv", {{"path", dir + "/k"}, {"exists", true}}},
                       {"trace_view_json", {{"path", dir + "/t"}, {"exists", true}}}}},
          {"analysis_status", "ok"}};
}

// Runs a clean collection up to (not including) the analyse step results.
void RunToAnalysing(Flow& f, json bench = json::array({{{"ok", true}}, {{"ok", true}}})) {
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.state().state, "launching");
  const TaskInfo* launch = f.Pending(kServiceLaunchTask);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->payload["run_id"], "r1");
  EXPECT_EQ(launch->payload["env"]["PYTORCH_NPU_ALLOC_CONF"], "expandable_segments:True");
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  ASSERT_EQ(f.Pending(kServiceWaitReadyTask)->payload["pid"], 4242);
  ASSERT_EQ(f.Result(kServiceWaitReadyTask, {{"ready_after_ms", 10}}), "");
  ASSERT_EQ(f.state().state, "profiling");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", true}, {"status", 200}}, "start_profile"), "");
  ASSERT_EQ(f.state().state, "workload");
  ASSERT_EQ(f.Result(kTpRequestsTask, {{"results", bench}}, "wave"), "");
  ASSERT_EQ(f.Result(kTpRequestsTask, {{"results", json::array({{{"ok", true}, {"index", 2}}})}}, "followup"), "");
  ASSERT_EQ(f.state().state, "stopping_profile");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", true}, {"status", 200}}, "stop_profile"), "");
  ASSERT_EQ(f.state().state, "flush");
  EXPECT_EQ(f.FireTimer("flush"), "no timer flush");  // flush_seconds 0: no minimum window
  const TaskInfo* wait = f.Pending(kTpWaitFlushTask);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->payload["profile_root"], "/rt/svc-1/vllm_profile");
  EXPECT_EQ(wait->payload["expected_ranks"], 2);
  EXPECT_EQ(wait->payload["warm_sessions"], 1);  // half the host's 2 ranks: AnalyseWarmSessions
  EXPECT_EQ(wait->payload["timeout_s"], 300);
  EXPECT_GT(wait->payload["deadline_ms"].get<int64_t>(), int64_t{1700000000000} + 300000);  // now + 300 s
  ASSERT_EQ(f.Result(kTpWaitFlushTask, {{"signal", "profiler_info"}, {"flush_timed_out", false}, {"waited_ms", 120}}), "");
  ASSERT_EQ(f.state().state, "stopping_service");
  EXPECT_EQ(f.state().data["flush"]["signal"], "profiler_info");
  EXPECT_EQ(f.state().data["flush"]["waited_ms"], 120);
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  ASSERT_EQ(f.state().state, "analysing");
  EXPECT_EQ(f.Pending(kTpListDirsTask)->payload["profile_root"], "/rt/svc-1/vllm_profile");
  EXPECT_EQ(f.Pending(kTpListDirsTask)->payload["warm_sessions"], 1);
}

// A listing's result with the target's means: every dir `dir_mib` MiB.
json Listed(const std::vector<std::string>& dirs, int64_t cores, int64_t mem_mib, int64_t dir_mib) {
  json sizes = json::array();
  for (size_t i = 0; i < dirs.size(); ++i) sizes.push_back(dir_mib << 20);
  return {{"dirs", dirs},
          {"means", {{"cores", cores}, {"mem_available_bytes", mem_mib << 20}, {"dir_bytes", sizes}}}};
}

TEST(TorchProfileFlow, CleanRunCompletesWithEveryManifestField) {
  Flow f;
  RunToAnalysing(f);
  ASSERT_EQ(f.Result(kTpListDirsTask, Listed({"/p/a_ascend_pt", "/p/b_ascend_pt"}, 8, 65536, 1)), "");
  EXPECT_EQ(f.PendingCount(kTpAnalyseRankTask), 2);
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/a_ascend_pt")), "");
  EXPECT_FALSE(f.state().terminal);
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/b_ascend_pt")), "");
  EXPECT_TRUE(f.state().terminal);
  EXPECT_EQ(f.state().status, RunStatus::kOk);
  EXPECT_EQ(f.state().state, "completed");
  const json m = f.Manifest();
  for (const auto& field : TorchProfileManifestFields()) EXPECT_TRUE(m.contains(field)) << field;
  EXPECT_TRUE(m.contains("completed_at"));
  EXPECT_FALSE(m.contains("failed_at"));
  EXPECT_EQ(m["schema_version"], 1);
  EXPECT_EQ(m["analysis_status"], "ok");
  EXPECT_EQ(m["workload_status"]["status"], "ok");
  EXPECT_EQ(m["rank_count"], 2);
  EXPECT_EQ(m["expected_ranks"], 2);
  EXPECT_EQ(m["remote_profile_root"], "/rt/svc-1/vllm_profile");
  EXPECT_EQ(m["remote_profile_dirs"].size(), 2u);
  EXPECT_EQ(m["benchmark_results"].size(), 2u);
  EXPECT_EQ(m["followup_result"]["index"], 2);
  EXPECT_EQ(m["service_result"]["pid"], 4242);
  EXPECT_EQ(m["stop_result"]["stopped"], true);
  EXPECT_TRUE(m["error"].is_null());
  EXPECT_EQ(m["status"], "ok");
}

// Drives a run up to the flush state with the given spec changes (an object).
void RunToFlush(Flow& f, const json& changes) {
  json spec = BaseSpec();
  spec.update(changes);
  ASSERT_EQ(f.Submit(spec), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  ASSERT_EQ(f.Result(kServiceWaitReadyTask, {{"ready_after_ms", 10}}), "");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", true}, {"status", 200}}, "start_profile"), "");
  ASSERT_EQ(f.Result(kTpRequestsTask, {{"results", json::array({{{"ok", true}}})}}, "wave"), "");
  ASSERT_EQ(f.Result(kTpRequestsTask, {{"results", json::array({{{"ok", true}, {"index", 1}}})}}, "followup"), "");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", true}, {"status", 200}}, "stop_profile"), "");
  ASSERT_EQ(f.state().state, "flush");
}

TEST(TorchProfileFlow, FlushSecondsIsAMinimumBeforeTheWait) {
  Flow f;
  RunToFlush(f, {{"flush_seconds", 2}, {"flush_timeout", 9}});
  EXPECT_EQ(f.Pending(kTpWaitFlushTask), nullptr);  // the minimum first
  ASSERT_EQ(f.FireTimer("flush"), "");
  ASSERT_EQ(f.state().state, "flush");
  const TaskInfo* wait = f.Pending(kTpWaitFlushTask);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->payload["timeout_s"], 9);
  ASSERT_EQ(f.Result(kTpWaitFlushTask, {{"signal", "profiler_info"}, {"flush_timed_out", false}, {"waited_ms", 5}}), "");
  EXPECT_EQ(f.state().state, "stopping_service");
  EXPECT_EQ(f.state().data["flush"]["min_wait_s"], 2);
}

TEST(TorchProfileFlow, FlushTimeoutGoesOnAndIsRecorded) {
  Flow f;
  RunToFlush(f, {{"flush_timeout", 3}});
  const json dirs = json::array({{{"name", "a_ascend_pt"}, {"profiler_info", true}},
                                  {{"name", "b_ascend_pt"}, {"profiler_info", false}}});
  ASSERT_EQ(f.Result(kTpWaitFlushTask,
                     {{"signal", "timeout"}, {"flush_timed_out", true}, {"waited_ms", 3010}, {"dirs", dirs}}),
            "");
  ASSERT_EQ(f.state().state, "stopping_service");
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  ASSERT_EQ(f.state().state, "analysing");
  EXPECT_TRUE(f.state().data.value("errors", json::array()).empty());  // the gates judge, not the wait
  ASSERT_EQ(f.Result(kTpListDirsTask, {{"dirs", {"/p/a_ascend_pt", "/p/b_ascend_pt"}}}), "");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/a_ascend_pt")), "");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/b_ascend_pt")), "");
  ASSERT_TRUE(f.state().terminal);
  const json m = f.Manifest();
  EXPECT_EQ(m["flush"]["signal"], "timeout");
  EXPECT_EQ(m["flush"]["flush_timed_out"], true);
  EXPECT_EQ(m["flush_timeout"], 3);
  // The rank torch_npu never finalised is partial even though analyse() wrote its outputs.
  EXPECT_EQ(m["analysis_status"], "partial");
  EXPECT_EQ(m["remote_profile_dirs"][0]["analysis_status"], "ok");
  EXPECT_EQ(m["remote_profile_dirs"][1]["analysis_status"], "partial");
  EXPECT_EQ(m["remote_profile_dirs"][1]["finalised"], false);
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
}

TEST(TorchProfileFlow, FinalisedRanksAreAnalysedWhileTheServiceStopsAndJudgedOnceItStopped) {
  Flow f;
  RunToFlush(f, json::object());
  ASSERT_EQ(f.Result(kTpWaitFlushTask, {{"signal", "profiler_info"}, {"flush_timed_out", false}, {"waited_ms", 5}}), "");
  ASSERT_EQ(f.state().state, "stopping_service");
  ASSERT_NE(f.Pending(kServiceStopTask), nullptr);
  ASSERT_NE(f.Pending(kTpListDirsTask), nullptr) << "every rank finalised: listed beside the stop";
  ASSERT_EQ(f.Result(kTpListDirsTask, Listed({"/p/a_ascend_pt", "/p/b_ascend_pt"}, 8, 65536, 1)), "");
  EXPECT_EQ(f.PendingCount(kTpAnalyseRankTask), 2);
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/a_ascend_pt")), "");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/b_ascend_pt")), "");
  EXPECT_FALSE(f.state().terminal) << "judged once the service stopped";
  EXPECT_EQ(f.state().state, "stopping_service");
  // The unforced stop did not end it: escalated, still not judged.
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", false}}), "");
  EXPECT_FALSE(f.state().terminal);
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  ASSERT_TRUE(f.state().terminal);
  EXPECT_EQ(f.state().status, RunStatus::kOk) << f.state().error;
  EXPECT_EQ(f.PendingCount(kTpListDirsTask), 0) << "listed once";
  EXPECT_EQ(f.Manifest()["rank_count"], 2);
}

TEST(TorchProfileFlow, AfterAFlushTimeoutTheRanksAreListedOnlyOnceTheServiceStopped) {
  Flow f;
  RunToFlush(f, {{"flush_timeout", 3}});
  ASSERT_EQ(f.Result(kTpWaitFlushTask, {{"signal", "timeout"}, {"flush_timed_out", true}, {"waited_ms", 3010}}), "");
  ASSERT_EQ(f.state().state, "stopping_service");
  EXPECT_EQ(f.Pending(kTpListDirsTask), nullptr) << "a rank may still be written";
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  ASSERT_EQ(f.state().state, "analysing");
  EXPECT_NE(f.Pending(kTpListDirsTask), nullptr);
}

TEST(TorchProfileFlow, FailedFlushWaitStillStopsAndAnalyses) {
  Flow f;
  RunToFlush(f, json::object());
  ASSERT_EQ(f.Result(kTpWaitFlushTask, json::object(), "", false, "remote_error"), "");
  ASSERT_EQ(f.state().state, "stopping_service");
  EXPECT_EQ(f.state().data["flush"]["signal"], "wait_failed");
  EXPECT_EQ(f.state().data["flush"]["error_kind"], "remote_error");
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  EXPECT_EQ(f.state().state, "analysing");
}

TEST(TorchProfileFlow, CancelDuringFlushWaitStopsService) {
  Flow f;
  RunToFlush(f, json::object());
  ASSERT_NE(f.Pending(kTpWaitFlushTask), nullptr);
  ASSERT_EQ(f.Cancel(), "");
  EXPECT_EQ(f.Pending(kTpWaitFlushTask), nullptr);
  ASSERT_EQ(f.state().state, "stopping_service");
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kCancelled);
}

TEST(TorchProfileFlow, BelowThresholdStillAnalysesThenFails) {
  Flow f;
  RunToAnalysing(f, json::array({{{"ok", true}}, {{"ok", false}}}));
  ASSERT_EQ(f.Result(kTpListDirsTask, {{"dirs", {"/p/a_ascend_pt"}}}), "");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/a_ascend_pt")), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
  EXPECT_NE(f.state().error.find("workload gate: benchmark_below_threshold"), std::string::npos) << f.state().error;
  EXPECT_NE(f.state().error.find("analysis gate: rank_count_mismatch"), std::string::npos);
  EXPECT_NE(f.state().error.find("re-collect required"), std::string::npos);
  const json m = f.Manifest();
  EXPECT_TRUE(m.contains("failed_at"));
}

TEST(TorchProfileFlow, NoProfileDirs) {
  Flow f;
  RunToAnalysing(f);
  ASSERT_EQ(f.Result(kTpListDirsTask, {{"dirs", json::array()}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
  EXPECT_EQ(f.Manifest()["analysis_status"], "no_profile_dirs");
}

TEST(TorchProfileFlow, StartProfile500StopsServiceAndFails) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  ASSERT_EQ(f.Result(kServiceWaitReadyTask, json::object()), "");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", false}, {"status", 500}}, "start_profile"), "");
  EXPECT_EQ(f.state().state, "stopping_service");
  ASSERT_NE(f.Pending(kServiceStopTask), nullptr);
  EXPECT_EQ(f.Pending(kServiceStopTask)->payload["force"], false);
  // graceful stop did not work -> forced
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", false}}), "");
  EXPECT_EQ(f.Pending(kServiceStopTask)->payload["force"], true);
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
  EXPECT_NE(f.state().error.find("start_profile"), std::string::npos);
  EXPECT_EQ(f.PendingCount(kTpListDirsTask), 0);
  EXPECT_EQ(f.Manifest()["analyse_limits"], json::array());  // nothing listed: no choice made
  EXPECT_NE(f.Manifest()["step_errors"].dump().find("/start_profile answered HTTP 500"), std::string::npos)
      << f.Manifest()["step_errors"];
}

// A launch that succeeded without a result says nothing of where its service
// runs: the decision refuses it (the broker then fails the task, kind_failed,
// and the cleanup stops the service by the payload's runtime dir).
TEST(TorchProfileFlow, ALaunchSuccessWithoutAResultIsNotActedOn) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  EXPECT_THROW(f.Result(kServiceLaunchTask, json::object()), std::logic_error);
  EXPECT_EQ(f.PendingCount(kServiceWaitReadyTask), 0) << "nothing was scheduled from an empty answer";
}

// A control step that got no answer at all (status null) is read from its
// message: the step error says so and the service is stopped, as for a 500.
TEST(TorchProfileFlow, StartProfileWithoutAnAnswerStopsServiceAndSaysWhy) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  ASSERT_EQ(f.Result(kServiceWaitReadyTask, json::object()), "");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", false}, {"status", nullptr}, {"error", "connection refused"}},
                     "start_profile"),
            "");
  EXPECT_EQ(f.state().state, "stopping_service");
  const std::string errors = f.Manifest()["step_errors"].dump();
  EXPECT_NE(errors.find("/start_profile got no answer: connection refused"), std::string::npos) << errors;
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
}

TEST(TorchProfileFlow, NeverReadyStopsService) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  ASSERT_EQ(f.Result(kServiceWaitReadyTask, json::object(), "", false, "never_ready"), "");
  EXPECT_EQ(f.state().state, "stopping_service");
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
  EXPECT_NE(f.state().error.find("never_ready"), std::string::npos) << f.state().error;
}

TEST(TorchProfileFlow, CancelDuringWorkloadStopsServiceThenCancelled) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  ASSERT_EQ(f.Result(kServiceWaitReadyTask, json::object()), "");
  ASSERT_EQ(f.Result(kTpControlTask, {{"ok", true}, {"status", 200}}, "start_profile"), "");
  ASSERT_EQ(f.Cancel(), "");
  EXPECT_EQ(f.state().state, "stopping_service");
  EXPECT_EQ(f.PendingCount(kTpRequestsTask), 0);
  EXPECT_FALSE(f.state().terminal);
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kCancelled);
}

TEST(TorchProfileFlow, CancelDuringLaunchWaitsForPidThenStops) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Cancel(), "");
  EXPECT_FALSE(f.state().terminal);
  ASSERT_NE(f.Pending(kServiceLaunchTask), nullptr);
  ASSERT_EQ(f.Result(kServiceLaunchTask, Launched()), "");
  EXPECT_EQ(f.state().state, "stopping_service");
  EXPECT_EQ(f.PendingCount(kServiceWaitReadyTask), 0);
  ASSERT_EQ(f.Result(kServiceStopTask, {{"already_gone", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kCancelled);
}

TEST(TorchProfileFlow, LaunchFailureWithoutPidFailsAtOnce) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, {{"started", false}}, "", false, "devices_unavailable"), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
  EXPECT_NE(f.state().error.find("devices_unavailable"), std::string::npos);
  EXPECT_NE(f.state().error.find("the service was never launched"), std::string::npos) << f.state().error;
  EXPECT_EQ(f.PendingCount(kServiceStopTask), 0);
}

TEST(TorchProfileFlow, LaunchLostStillStopsByRuntimeDir) {
  Flow f;
  ASSERT_EQ(f.Submit(BaseSpec()), "");
  ASSERT_EQ(f.Result(kServiceLaunchTask, json::object(), "", false, "launch_lost"), "");
  EXPECT_EQ(f.state().state, "stopping_service");
  const TaskInfo* stop = f.Pending(kServiceStopTask);
  ASSERT_NE(stop, nullptr);
  EXPECT_EQ(stop->payload["runtime_dir"], "/rt/r1/service-1");
  EXPECT_FALSE(stop->payload.contains("pid")) << "pid not given: the handler reads <runtime_dir>/pid";
  ASSERT_EQ(f.Result(kServiceStopTask, {{"already_gone", true}}), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
}

TEST(TorchProfileFlow, VlPreparesImageFirst) {
  Flow f;
  json spec = BaseSpec();
  spec["request_kind"] = "vl";
  spec["image_path"] = "/tmp/img.png";
  ASSERT_EQ(f.Submit(spec), "");
  EXPECT_EQ(f.state().state, "preparing_image");
  EXPECT_EQ(f.PendingCount(kServiceLaunchTask), 0);
  ASSERT_EQ(f.Result(kTpPrepareImageTask, {{"image_meta", {{"height", 480}}}}), "");
  EXPECT_EQ(f.state().state, "launching");
  EXPECT_EQ(f.Manifest()["image_meta"]["height"], 480);
}

TEST(TorchProfileFlow, ReplayReproducesManifest) {
  Flow f;
  RunToAnalysing(f);
  ASSERT_EQ(f.Result(kTpListDirsTask, {{"dirs", {"/p/a_ascend_pt"}}}), "");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/a_ascend_pt")), "");
  // Manifest is a pure function of the state: two calls give the same bytes.
  EXPECT_EQ(f.Manifest().dump(), f.Manifest().dump());
}

// 4 cores and memory for 2 ranks at a time: at most 2 analyses out, the
// next as one ends, the limit and its reason recorded and shown.
TEST(TorchProfileFlow, AnalysesRunWithinTheTargetsMeans) {
  Flow f;
  RunToAnalysing(f);
  const std::vector<std::string> dirs = {"/p/a_ascend_pt", "/p/b_ascend_pt", "/p/c_ascend_pt", "/p/d_ascend_pt"};
  ASSERT_EQ(f.Result(kTpListDirsTask, Listed(dirs, 4, 500, 10)), "");
  EXPECT_EQ(f.PendingCount(kTpAnalyseRankTask), 2);
  const json limits = f.state().data["analyse_limits"];
  ASSERT_EQ(limits.size(), 1u);
  EXPECT_EQ(limits[0]["limit"], 2);
  EXPECT_EQ(limits[0]["source"], "means");
  EXPECT_EQ(limits[0]["reason"],
            "4 cores, 500.0 MiB available, largest rank 10.0 MiB raw ×20 = 200.0 MiB each → 2 at a time (bound by memory)");
  EXPECT_EQ(limits[0]["ranks"], 4);
  for (const std::string& dir : dirs) {
    const TaskInfo* t = f.Pending(kTpAnalyseRankTask);
    ASSERT_NE(t, nullptr) << dir;
    const std::string pending = t->payload["dir"];
    ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk(pending)), "");
    EXPECT_LE(f.PendingCount(kTpAnalyseRankTask), 2);
  }
  EXPECT_TRUE(f.state().terminal);
  const json m = f.Manifest();
  EXPECT_EQ(m["analysis_status"], "rank_count_mismatch");  // every rank analysed: 4 dirs where tp 2 wrote 2
  ASSERT_EQ(m["analyse_limits"].size(), 1u);
  EXPECT_EQ(m["analyse_limits"][0]["limit"], 2);
  EXPECT_EQ(m["remote_profile_dirs"].size(), 4u);
  EXPECT_EQ(DefaultKinds().Find("torch-profile")->Summary(f.state())["analyse_limits"][0]["limit"], 2);
}

// A failed analyse frees its place too; without means the safe default is one at a time.
TEST(TorchProfileFlow, NoMeansMeansOneAtATimeAndAFailureFreesItsPlace) {
  Flow f;
  RunToAnalysing(f);
  ASSERT_EQ(f.Result(kTpListDirsTask, {{"dirs", {"/p/a_ascend_pt", "/p/b_ascend_pt"}}}), "");
  EXPECT_EQ(f.PendingCount(kTpAnalyseRankTask), 1);
  EXPECT_EQ(f.state().data["analyse_limits"][0]["source"], "default");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, json::object(), "", false, "analyse_launch_failed"), "");
  ASSERT_EQ(f.PendingCount(kTpAnalyseRankTask), 1);
  EXPECT_EQ(f.Pending(kTpAnalyseRankTask)->payload["dir"], "/p/b_ascend_pt");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/b_ascend_pt")), "");
  EXPECT_TRUE(f.state().terminal);
  EXPECT_EQ(f.Manifest()["analysis_status"], "missing_kernel_details");
}

TEST(TorchProfileFlow, AnalyseParallelOverridesTheMeans) {
  Flow f;
  RunToFlush(f, {{"analyse_parallel", 3}});
  ASSERT_EQ(f.Result(kTpWaitFlushTask, {{"signal", "profiler_info"}, {"flush_timed_out", false}}), "");
  ASSERT_EQ(f.Result(kServiceStopTask, {{"stopped", true}}), "");
  ASSERT_EQ(f.Result(kTpListDirsTask, Listed({"/p/a", "/p/b", "/p/c", "/p/d"}, 1, 1, 1024)), "");
  EXPECT_EQ(f.PendingCount(kTpAnalyseRankTask), 3);
  EXPECT_EQ(f.state().data["analyse_limits"][0]["reason"], "--analyse-parallel 3");
}

TEST(TorchProfileSpec, AnalyseParallelIsOneTo1024) {
  json spec = BaseSpec();
  ASSERT_TRUE(ValidateTorchProfileSpec(spec).ok());
  EXPECT_TRUE(spec["analyse_parallel"].is_null());
  for (const json& bad : {json(0), json(-2), json(1025), json("4"), json(2.5)}) {
    json s = BaseSpec();
    s["analyse_parallel"] = bad;
    const Status st = ValidateTorchProfileSpec(s);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("--analyse-parallel"), std::string::npos) << st.message();
  }
  json ok = BaseSpec();
  ok["analyse_parallel"] = 1024;
  EXPECT_TRUE(ValidateTorchProfileSpec(ok).ok());
}

TEST(AnalyseRootFlow, AnalyseParallelAndMeansApplyToo) {
  Flow f("analyse-root");
  ASSERT_NE(f.Submit({{"machine", "m1"}, {"machine_record", MachineRecord()}, {"profile_root", "/p"},
                      {"expected_ranks", 2}, {"analyse_parallel", 0}}),
            "");
  Flow g("analyse-root");
  ASSERT_EQ(g.Submit({{"machine", "m1"}, {"machine_record", MachineRecord()}, {"profile_root", "/p"},
                      {"expected_ranks", 3}}),
            "");
  ASSERT_EQ(g.Result(kTpListDirsTask, Listed({"/p/a", "/p/b", "/p/c"}, 2, 65536, 1)), "");
  EXPECT_EQ(g.PendingCount(kTpAnalyseRankTask), 2);
  EXPECT_EQ(g.Manifest()["analyse_limits"][0]["limit"], 2);
  EXPECT_EQ(DefaultKinds().Find("analyse-root")->Summary(g.state())["analyse_limits"][0]["limit"], 2);
}

TEST(AnalyseRootFlow, GatesAndManifest) {
  Flow f("analyse-root");
  ASSERT_NE(f.Submit({{"machine", "m1"}, {"machine_record", MachineRecord()}, {"profile_root", "/p/"}}), "")
      << "expected_ranks is required";
  ASSERT_EQ(f.Submit({{"machine", "m1"}, {"machine_record", MachineRecord()}, {"profile_root", "/p/"},
                      {"expected_ranks", 2}}),
            "");
  EXPECT_EQ(f.Pending(kTpListDirsTask)->payload["profile_root"], "/p");
  ASSERT_EQ(f.Result(kTpListDirsTask, {{"dirs", {"/p/a_ascend_pt", "/p/b_ascend_pt"}}}), "");
  json partial = RankOk("/p/b_ascend_pt");
  partial["analysis_status"] = "partial";
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, RankOk("/p/a_ascend_pt")), "");
  ASSERT_EQ(f.Result(kTpAnalyseRankTask, partial), "");
  EXPECT_EQ(f.state().status, RunStatus::kFailed);
  const json m = f.Manifest();
  EXPECT_EQ(m["analysis_status"], "partial");
  EXPECT_EQ(m["rank_count"], 2);
  EXPECT_EQ(m["remote_profile_root"], "/p");
}

}  // namespace
}  // namespace npuprof::sm
