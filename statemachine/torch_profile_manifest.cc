#include "statemachine/torch_profile_manifest.h"

#include "common/time_util.h"
#include "statemachine/clock_offsets.h"
#include "statemachine/deployment_service.h"
#include "statemachine/torch_profile_analysis.h"
#include "statemachine/torch_profile_capture.h"
#include "statemachine/torch_profile_machine.h"
#include "statemachine/torch_profile_spec.h"
#include "statemachine/torch_profile_tasks.h"

namespace npuprof::sm {

namespace {

// What a step produced: its result, or {ok:false, error_kind, error} when it
// failed for good; null while it has not ended (or never ran).
json StepRecord(const TaskInfo* t) {
  if (!t) return nullptr;
  if (t->status == TaskStatus::kSucceeded) return TaskResultData(t);
  if (t->status == TaskStatus::kFailed) {
    json r = {{"ok", false}, {"error_kind", t->result.value("error_kind", "")}, {"error", t->result.value("error", "")}};
    if (t->result.contains("result")) r["partial_result"] = t->result["result"];
    return r;
  }
  if (t->status == TaskStatus::kAbandoned)
    return json{{"ok", false}, {"error_kind", "abandoned"}, {"error", "abandoned"}};
  return nullptr;
}

json SpecField(const RunState& s, const char* f) { return s.spec.value(f, json(nullptr)); }

void AddTimes(const RunState& s, json& m) {
  m["started_at"] = IsoTimeMs(s.created_ms);
  if (s.terminal) {
    if (s.status == RunStatus::kOk) m["completed_at"] = IsoTimeMs(s.finished_ms);
    else m["failed_at"] = IsoTimeMs(s.finished_ms);
  }
}

}  // namespace

const std::vector<std::string>& TorchProfileManifestFields() {
  static const std::vector<std::string> f = {
      "schema_version", "tag", "started_at", "machine", "session_id", "model", "served_model_name", "tp", "dp",
      "mode", "request_kind", "speculative_tokens", "speculative_method", "enable_expert_parallel",
      "api_server_count", "torch_profiler_with_stack", "torch_profiler_dir", "prompt_tokens",
      "benchmark_output_tokens", "followup_output_tokens", "benchmark_total_requests", "benchmark_concurrency",
      "benchmark_success_threshold", "expected_ranks", "profile_control_timeout", "serve_args", "image_meta",
      "service_result", "start_profile", "stop_profile", "benchmark_results", "benchmark_wall_ms", "followup_result",
      "workload_status", "stop_result", "remote_profile_root", "remote_profile_dirs", "rank_count",
      "analysis_status", "status", "error"};
  return f;
}

json TorchProfileManifest(const RunState& s) {
  json m = json::object();
  m["schema_version"] = 1;
  m["run_id"] = s.run_id;
  m["kind"] = s.kind;
  m["tag"] = s.tag;
  AddTimes(s, m);
  m["machine"] = s.machine;
  m["session_id"] = s.run_id;
  for (const char* f : {"model", "served_model_name", "tp", "dp", "mode", "request_kind", "speculative_tokens",
                        "speculative_method", "enable_expert_parallel", "api_server_count",
                        "torch_profiler_with_stack", "torch_profiler_dir", "prompt_tokens",
                        "benchmark_output_tokens", "followup_output_tokens", "benchmark_total_requests",
                        "benchmark_concurrency", "benchmark_success_threshold", "profile_control_timeout",
                        "request_timeout", "image_height"})
    m[f] = SpecField(s, f);
  // From the spec's message (typed_spec.h; the fold decodes one for every
  // stored torch-profile run). The serve args only for a run whose stored spec
  // names its mode and length: one stored before those fields existed has no
  // serve args to show.
  const auto* typed = dynamic_cast<const run_specs::TorchProfileSpec*>(s.typed_spec.get());
  const int expected_ranks = typed != nullptr ? ExpectedRanks(*typed) : 0;
  m["expected_ranks"] = typed != nullptr ? json(expected_ranks) : json(nullptr);
  m["serve_args"] = typed != nullptr && s.spec.contains("mode") && s.spec.contains("max_model_len")
                        ? json(TorchProfileServeArgs(*typed))
                        : json::array();

  const json image = StepRecord(LastTask(s, kTpPrepareImageTask));
  m["image_meta"] = image.is_object() && image.contains("image_meta") ? image["image_meta"] : image;

  json service = StepRecord(LastNodeTask(s, kServiceLaunchTask, 0));
  if (service.is_object()) service["ready"] = StepRecord(LastTask(s, kServiceWaitReadyTask));
  m["service_result"] = service;
  // The argv that ran, as the launch read it back from the target's launch
  // record; `npuprof verify` checks its managed values against the spec.
  m["serve_argv"] = service.is_object() ? service.value("serve_argv", json::array()) : json::array();
  m["launch_record"] = service.is_object() && service.contains("runtime_dir") && service["runtime_dir"].is_string()
                           ? json(service["runtime_dir"].get<std::string>() + "/launch.json")
                           : json(nullptr);
  m["start_profile"] = StepRecord(LastTask(s, kTpControlTask, "start_profile"));
  m["stop_profile"] = StepRecord(LastTask(s, kTpControlTask, "stop_profile"));
  const json wave = StepRecord(LastTask(s, kTpRequestsTask, "wave"));
  m["benchmark_results"] = wave.is_object() && wave.contains("results") ? wave["results"] : json::array();
  m["benchmark_wall_ms"] = wave.is_object() && wave.contains("wall_ms") ? wave["wall_ms"] : json(nullptr);
  const json followup = StepRecord(LastTask(s, kTpRequestsTask, "followup"));
  m["followup_result"] = followup.is_object() && followup.contains("results") && !followup["results"].empty()
                             ? followup["results"][0]
                             : followup;
  m["workload_status"] = s.data.value("workload_status", json(nullptr));
  // How the wait for torch_npu's finalise ended (signal, waited_ms, flush_timed_out).
  m["flush"] = s.data.value("flush", json(nullptr));
  m["flush_seconds"] = SpecField(s, "flush_seconds");
  m["flush_timeout"] = SpecField(s, "flush_timeout");
  m["stop_result"] = StepRecord(LastNodeTask(s, kServiceStopTask, 0));
  if (NodeCount(s) > 1) {
    // A multi-node deployment: every node's service, the head's first.
    json nodes = json::array();
    for (int i = 0; i < NodeCount(s); ++i)
      nodes.push_back({{"node", i},
                       {"machine", NodeMachine(s, i)},
                       {"role", i == 0 ? "head" : "headless"},
                       {"service_result", StepRecord(LastNodeTask(s, kServiceLaunchTask, i))},
                       {"stop_result", StepRecord(LastNodeTask(s, kServiceStopTask, i))}});
    m["nodes"] = std::move(nodes);
    for (const char* f : {"dp_local", "dp_address", "dp_rpc_port"}) m[f] = SpecField(s, f);
    // Each node's clock offset from the worker's: traces of different nodes
    // are put on one timeline by subtracting their node's offset.
    m["clock_offsets"] = ClockProjection(s);
  }

  const json a = AnalysisProjection(s, expected_ranks);
  for (const char* f : {"remote_profile_root", "remote_profile_dirs", "rank_count", "analyse_limits"}) m[f] = a[f];
  for (const char* f : {"remote_profile_roots", "rank_counts"})
    if (a.contains(f)) m[f] = a[f];
  m["analysis_status"] = s.data.contains("analysis_status") ? s.data["analysis_status"] : a["analysis_status"];
  m["status"] = RunStatusName(s.status);
  m["error"] = s.error.empty() ? json(nullptr) : json(s.error);
  m["step_errors"] = s.data.value("errors", json::array());
  // The capture controls and the budget check, only on a run that used them
  // (a run without them keeps the manifest it always had).
  if (typed != nullptr && (CaptureCheckWanted(*typed) || s.data.contains("capture_check"))) {
    m["capture_flags"] = CaptureFlagsRecord(*typed);
    m["capture_check"] = s.data.value("capture_check", json(nullptr));
    const std::string note = CaptureBudgetNote(s);
    m["capture_note"] = note.empty() ? json(nullptr) : json(note);
  }
  return m;
}

json AnalyseRootManifest(const RunState& s) {
  json m = json::object();
  m["schema_version"] = 1;
  m["run_id"] = s.run_id;
  m["kind"] = s.kind;
  m["tag"] = s.tag;
  AddTimes(s, m);
  m["machine"] = s.machine;
  m["session_id"] = s.run_id;
  const int expected = s.spec.value("expected_ranks", 1);
  m["expected_ranks"] = expected;
  const json a = AnalysisProjection(s, expected);
  for (const char* f : {"remote_profile_root", "remote_profile_dirs", "rank_count", "analyse_limits"}) m[f] = a[f];
  if (m["remote_profile_root"].is_null()) m["remote_profile_root"] = SpecField(s, "profile_root");
  m["analysis_status"] = s.data.contains("analysis_status") ? s.data["analysis_status"] : a["analysis_status"];
  m["status"] = RunStatusName(s.status);
  m["error"] = s.error.empty() ? json(nullptr) : json(s.error);
  m["step_errors"] = s.data.value("errors", json::array());
  return m;
}

}  // namespace npuprof::sm
