#include "statemachine/memory_profile_machine.h"

#include <stdexcept>

#include <fmt/format.h>

#include "common/json_field.h"

#include "statemachine/event_types.h"
#include "statemachine/inference_window.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/memory_manifest.h"
#include "statemachine/memory_profile_spec.h"
#include "statemachine/memory_profile_steps.h"
#include "statemachine/memory_report.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/service_spec.h"
#include "statemachine/memory_profile_events.h"
#include "statemachine/task_payload.h"
#include "statemachine/typed_data.h"
#include "statemachine/typed_spec.h"
#include "kind_data.pb.h"
#include "run_specs.pb.h"
#include "task_payloads.pb.h"

namespace npuprof::sm {

namespace {

// The run's validated spec (read at the point of use: a lease grant may
// replace the decoded message). ValidateMemorySpec fills the standalone
// fields (stop_grace_s, model, tp, ...) only in standalone mode: they are
// read from it only in standalone steps. What may be either the service's or
// the spec's (model, tp, dp of the weights step) is the service's first.
const run_specs::MemoryProfileSpec& Spec(const RunState& s) { return SpecOf<run_specs::MemoryProfileSpec>(s); }

const std::string& Mode(const RunState& s) { return Spec(s).mode(); }
bool Standalone(const RunState& s) { return Mode(s) == "standalone"; }

bool Failed(const RunState& s, const std::string& step) {
  return Field(s.data, "step_failures").is_object() && s.data["step_failures"].contains(step);
}
bool Done(const RunState& s, const std::string& step) { return s.data.contains(step) || Failed(s, step); }

// A step is in flight (task pending or retrying) or the flush minimum timer is armed.
bool Busy(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait) return true;
  for (const auto& [id, t] : s.timers)
    if (t.armed && t.purpose == "flush") return true;
  return false;
}

// The service this run profiles: its own (standalone) or the attached one.
json ServiceOf(const RunState& s) {
  if (Standalone(s)) {
    // The launch record says "starting"; where the service got since is
    // read from the run's own steps (ready, then the stop's result).
    json svc = s.data.value("service", json::object());
    if (!svc.is_object() || svc.empty()) return svc;
    const json& stopped = Field(s.data, "stopped");
    if (stopped.is_object() && stopped.value("never_started", false))
      svc["status"] = "never_started";
    else if (stopped.is_object())
      svc["status"] = stopped.value("stopped", true) || stopped.value("already_gone", false) ? "stopped" : "failed";
    else if (Field(s.data, "ready").is_object())
      svc["status"] = "ready";
    return svc;
  }
  json svc = Field(Field(s.spec, "attach_run_record"), "service");
  if (!svc.is_object()) svc = json::object();
  // The final record of the serve run (sent with its end) wins.
  const json& fin = Field(Field(Field(s.data, "serve_ended"), "summary"), "service");
  if (fin.is_object())
    for (const auto& [k, v] : fin.items()) svc[k] = v;
  return svc;
}

bool Wrapped(const RunState& s) {
  if (Standalone(s)) return true;
  const json svc = ServiceOf(s);
  return svc.contains("wrap_script") && svc["wrap_script"].is_string() && !svc["wrap_script"].get<std::string>().empty();
}

std::string MsprofDir(const RunState& s) { return StrField(ServiceOf(s), "runtime_dir") + "/msprof_data"; }

bool ServeEnded(const RunState& s) { return s.data.contains("serve_ended"); }

bool Skipped(const RunState& s, MemSkip why) {
  switch (why) {
    case MemSkip::kNever: return false;
    case MemSkip::kNotLive: return ServeEnded(s) || Failed(s, "ready");
    case MemSkip::kServeEnded: return ServeEnded(s);
    case MemSkip::kNotWrapped: return !Wrapped(s);
  }
  return false;
}

std::string BlobOf(const TaskInfo& task, const std::string& name) {
  const json& b = Field(task.result, "blobs");
  return b.is_object() ? b.value(name, "") : "";
}

// One piece of evidence, as its domain event (memory_profile_events.h).
void Record(Decision& d, const std::string& field, json value) {
  const std::string_view type = MemoryEventTypeFor(field);
  if (!type.empty() && value.is_object()) return d.Emit(std::string(type), std::move(value));
  d.Emit(kMemRecorded, json{{"field", field}, {"value", std::move(value)}});
}

void StepFailed(Decision& d, const std::string& step, const TaskFailure& failure) {
  d.Emit(kMemStepFailed, json{{"step", step}, {"error_kind", failure.error_kind()}, {"error", failure.error()}});
}

void Failing(Decision& d, const std::string& error) {
  if (!d.state().data.contains("failure")) d.Emit(kMemRunFailing, json{{"error", error}});
}

void MoveTo(Decision& d, const std::string& state) {
  if (d.state().state != state) d.Transition(state);
}


json MachineOf(const RunState& s) { return s.spec.value("machine_record", json::object()); }

bool ExpertParallel(const RunState& s) {
  if (Standalone(s)) return Spec(s).enable_expert_parallel();
  for (const auto& a : ServiceOf(s).value("extra_args", json::array()))
    if (a == "--enable-expert-parallel") return true;
  return false;
}

// service.launch failed before anything was started (result.started=false):
// there are no logs to read and nothing to stop.
bool LaunchNeverHappened(const RunState& s) {
  const TaskInfo* launch = LastTask(s, kServiceLaunchTask);
  return launch != nullptr && LaunchStartedNothing(*launch);
}

// ---- scheduling of each step ---------------------------------------------

// The attached or launched service's log path: the record's, else the
// launch's conventional one.
std::string LogOf(const json& svc, const char* key, const std::string& rt, const char* file) {
  return StrField(svc, key, rt + "/" + file);
}

std::string ServedNameOf(const json& svc) { return StrField(svc, "served_model_name", StrField(svc, "model", "")); }

void Schedule(Decision& d, const std::string& step) {
  const RunState& s = d.state();
  const json machine = MachineOf(s);
  const json svc = ServiceOf(s);
  MoveTo(d, step);  // the run's state is the step in progress
  if (step == "preflight") {
    tasks::MemoryPreflight p;
    p.set_step(step);
    p.set_run_id(s.run_id);
    p.set_wrap_script(MemoryWrapScriptPath(machine, s.run_id));
    p.set_msprof_mem_freq(Spec(s).msprof_mem_freq());
    d.Schedule(p);
  } else if (step == "baseline" || step == "after_ready" || step == "after_infer") {
    tasks::MemoryNpuSmi p;
    p.set_step(step);
    p.set_phase(step);
    d.Schedule(p);
  } else if (step == "service") {
    tasks::ServiceLaunch p = BuildLaunchPayload(s.run_id, 1, Spec(s), MemoryServeArgs(Spec(s)));
    p.set_served_model_name(MemoryServedName(Spec(s), s.run_id));
    p.set_wrap_script(StrField(Field(s.data, "preflight"), "wrap_script", MemoryWrapScriptPath(machine, s.run_id)));
    p.set_step(step);
    Record(d, "launch_attempted", json{{"runtime_dir", p.runtime_dir()}});
    d.Schedule(p);
  } else if (step == "ready") {
    tasks::ServiceWaitReady p;
    if (const TaskInfo* launch = Standalone(s) ? LastTask(s, kServiceLaunchTask) : nullptr) {
      p = BuildWaitReadyPayload(PayloadOf<tasks::ServiceLaunch>(*launch),
                                RecordedOf<results::ServiceLaunchResult>(*launch), d.now_ms());
    } else {
      const int64_t timeout_s = Spec(s).attach_ready_timeout_s();
      p.set_runtime_dir(StrField(svc, "runtime_dir"));
      if (auto pid = IntField(svc, "pid")) p.set_pid(*pid);
      if (auto port = IntField(svc, "port")) p.set_port(static_cast<int32_t>(*port));
      p.set_served_model_name(ServedNameOf(svc));
      p.set_health_timeout_s(timeout_s);
      p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
    }
    p.set_step(step);
    d.Schedule(p);
  } else if (step == "vllm_log") {
    const std::string rt = StrField(svc, "runtime_dir", StrField(Field(s.data, "launch_attempted"), "runtime_dir", ""));
    tasks::MemoryLogs p;
    p.set_step(step);
    p.set_runtime_dir(rt);
    p.set_stdout_log(LogOf(svc, "stdout_log", rt, "stdout.log"));
    p.set_stderr_log(LogOf(svc, "stderr_log", rt, "stderr.log"));
    d.Schedule(p);
  } else if (step == "inference") {
    tasks::MemoryInfer p;
    p.set_step(step);
    if (auto port = IntField(svc, "port")) p.set_port(static_cast<int32_t>(*port));
    p.set_served_model_name(ServedNameOf(svc));
    p.set_prompt(Spec(s).prompt());
    if (Spec(s).has_image_url()) p.set_image_url(Spec(s).image_url());
    p.set_max_tokens(Spec(s).max_tokens());
    p.set_timeout_s(600);
    p.set_server_scheduled_ms(d.now_ms());
    d.Schedule(p);
  } else if (step == "stopped") {
    const std::string rt = StrField(svc, "runtime_dir", StrField(Field(s.data, "launch_attempted"), "runtime_dir", ""));
    // Forced (SIGKILL) on cancel, or after a graceful stop left it running.
    const bool force = s.cancel_requested || s.data.contains("stop_escalated");
    // A standalone step (memory_profile_steps.cc): the spec holds stop_grace_s.
    tasks::ServiceStop p = BuildStopPayload(rt, IntField(svc, "pid"), force, Spec(s).stop_grace_s());
    // The graceful stop already sent SIGINT and SIGTERM and waited out both
    // graces: the escalation goes straight to SIGKILL (a hung msprof would
    // otherwise cost both graces again).
    if (StrField(Field(s.data, "stop_escalated"), "error_kind") == "still_running") p.set_kill_at_once(true);
    p.set_step(step);
    d.Schedule(p);
  } else if (step == "weights") {
    tasks::MemoryWeights p;
    p.set_step(step);
    p.set_model(StrField(svc, "model", StrField(s.spec, "model")));
    p.set_tp(static_cast<int32_t>(IntField(svc, "tp").value_or(IntField(s.spec, "tp").value_or(1))));
    p.set_dp(static_cast<int32_t>(IntField(svc, "dp").value_or(IntField(s.spec, "dp").value_or(1))));
    p.set_expert_parallel(ExpertParallel(s));
    d.Schedule(p);
  } else if (step == "flushed") {
    // flush_s is a minimum before the wait polls (0 = none); the wait itself
    // ends on msprof's own completion signals, or at its deadline.
    const int64_t min_s = Spec(s).flush_s();
    if (min_s > 0 && !s.data.contains("flush_min")) {
      d.ScheduleTimer("flush", min_s * 1000);
      return;
    }
    const int64_t timeout_s = Spec(s).flush_timeout_s();
    const std::string rt = StrField(svc, "runtime_dir");
    tasks::MemoryWaitFlush p;
    p.set_step(step);
    p.set_msprof_dir(MsprofDir(s));
    p.set_runtime_dir(rt);
    if (auto pid = IntField(svc, "pid")) p.set_pid(*pid);
    p.set_stdout_log(LogOf(svc, "stdout_log", rt, "stdout.log"));
    p.set_timeout_s(timeout_s);
    p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
    d.Schedule(p);
  } else if (step == "export") {
    const int64_t timeout_s = Spec(s).export_timeout_s();
    tasks::MemoryExport p;
    p.set_step(step);
    p.set_msprof_dir(MsprofDir(s));
    p.set_timeout_s(timeout_s + 60);
    d.Schedule(p);
    d.ScheduleTimer("export_timeout", timeout_s * 1000);
  } else if (step == "msprof") {
    tasks::MemoryCollectCsvs p;
    p.set_step(step);
    p.set_msprof_dir(MsprofDir(s));
    // The window the handler cuts each device's npu_mem series at (the
    // activation peak); absent when the inference gave none.
    if (auto w = ChooseInferenceWindow(Field(s.data, "inference"))) *p.mutable_inference_window() = ChosenWindowToMessage(*w);
    d.Schedule(p);
  }
}

// The planner: schedules the next missing step, or finishes.
void Advance(Decision& d) {
  const RunState& s = d.state();
  if (s.terminal || Busy(s) || d.failed()) return;
  const bool launched = Standalone(s) && s.data.contains("launch_attempted") && !LaunchNeverHappened(s);

  if (s.data.contains("failure") || s.cancel_requested) {
    for (const MemStep& step : MemoryStepsOf(Mode(s))) {
      const bool runs = step.cleanup == MemCleanup::kOnFailureOrCancel ||
                        (step.cleanup == MemCleanup::kOnFailure && !s.cancel_requested);
      if (launched && runs && !Done(s, std::string(step.name))) return Schedule(d, std::string(step.name));
    }
    if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
    std::string err = s.data["failure"].value("error", "memory-profile failed");
    if (Field(Field(s.data, "stopped"), "never_started") == true) err += " — the service was never launched";
    return d.Finish(RunStatus::kFailed, err);
  }

  const std::string mode = Mode(s);
  for (const MemStep& step : MemoryStepsOf(mode)) {
    if (Skipped(s, step.skip)) continue;
    if (step.wait) return MoveTo(d, std::string(step.name));
    if (!Done(s, std::string(step.name))) return Schedule(d, std::string(step.name));
  }
  d.Finish(RunStatus::kOk);
}

bool CriticalStep(const RunState& s, const std::string& step) {
  for (const MemStep& st : MemoryStepsOf(Mode(s)))
    if (st.name == step) return st.critical;
  return false;
}

std::string FailureText(const std::string& step, const TaskFailure& f) {
  return f.error_kind().empty() ? fmt::format("{}: {}", step, f.error())
                                : fmt::format("{} ({}): {}", step, f.error_kind(), f.error());
}

json BaselineFromSpec(const RunState& s) {
  const json& rec = Field(s.spec, "baseline_run_record");
  if (rec.is_object()) {
    const json& data = Field(rec, "data");
    const json& b = Field(data, "baseline");
    if (b.is_object() && b.contains("hbm"))
      return json{{"hbm", b["hbm"]}, {"source", "baseline_run"}, {"origin", Spec(s).baseline_run()},
                  {"blob", b.value("blob", "")}, {"file", "baseline_npu_smi.txt"}};
    const json& p = Field(data, "probe");
    if (p.is_object() && p.contains("hbm"))
      return json{{"hbm", p["hbm"]}, {"source", "baseline_run"}, {"origin", Spec(s).baseline_run()},
                  {"blob", StrField(Field(p, "evidence"), "npu_smi_info.txt", "")}, {"file", "baseline_npu_smi.txt"}};
  }
  if (s.spec.contains("baseline_hbm") && s.spec["baseline_hbm"].is_object())
    return json{{"hbm", s.spec["baseline_hbm"]}, {"source", "baseline_file"},
                {"origin", Spec(s).baseline_origin()}, {"blob", ""}, {"file", "baseline_npu_smi.txt"}};
  return nullptr;
}

}  // namespace

// ---- RunKind hooks -------------------------------------------------------

const TransitionTable& MemoryProfileMachine::transitions() const {
  return MemoryProfileTable();
}

Status MemoryProfileMachine::ValidateSpec(json& spec) const { return ValidateMemorySpec(spec); }

std::optional<DeviceNeed> MemoryProfileMachine::DevicesNeeded(const RunState& s) const {
  // attach observes a serve run's service (that run holds the devices);
  // install_wrapper only writes a script.
  if (Mode(s) != "standalone") return std::nullopt;
  return ServiceDeviceNeed(s, Spec(s));
}

void MemoryProfileMachine::OnStart(Decision& d) const {
  const RunState& s = d.state();
  if (!Standalone(s)) {
    json b = BaselineFromSpec(s);
    if (!b.is_null()) Record(d, "baseline", b);
  }
  if (Mode(s) == "attach") {
    const json& rec = Field(s.spec, "attach_run_record");
    const bool ended = !Field(rec, "finished_at").is_null() && Field(rec, "finished_at").is_string();
    if (ended)
      Record(d, "serve_ended", json{{"run_id", Spec(s).attach_run()}, {"status", rec.value("status", "")},
                                    {"state", rec.value("state", "")}, {"at_submit", true}});
    else
      d.WatchRun(Spec(s).attach_run());
  }
  Advance(d);
}

void MemoryProfileMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  const std::string step = task.payload.value("step", "");
  // Facts are recorded from the answer as it came (the run's evidence; a
  // success without a result records as {}); decisions read its message.
  static const json kNone = json::object();
  const json& answer = result.recorded().is_object() ? result.recorded() : kNone;
  if (task.kind == kMemPreflightTask) {
    Record(d, "preflight", answer);
  } else if (task.kind == kMemNpuSmiTask) {
    const std::string file = step + "_npu_smi.txt";
    Record(d, step, json{{"hbm", answer.value("hbm", json::object())}, {"source", "npu_smi"},
                         {"blob", BlobOf(task, file)}, {"file", file}});
  } else if (task.kind == kServiceLaunchTask) {
    (void)result.Required<results::ServiceLaunchResult>();  // where the service runs: the next steps need it
    Record(d, "service", ServiceRecordFromLaunch(task.payload, answer));
  } else if (task.kind == kServiceWaitReadyTask) {
    json r = answer;
    r["server_answered_ms"] = d.now_ms();  // the ready instant the activation's idle level is taken after
    Record(d, "ready", r);
  } else if (task.kind == kMemLogsTask) {
    Record(d, "vllm_log", json{{"summary", answer.value("summary", json::object())}, {"bytes", answer.value("bytes", 0)},
                               {"blob", BlobOf(task, "vllm_serve.log")}, {"file", "vllm_serve.log"}});
  } else if (task.kind == kMemInferTask) {
    json r = answer;
    r["blob"] = BlobOf(task, "inference_response.json");
    const int64_t scheduled_ms = PayloadOf<tasks::MemoryInfer>(task).server_scheduled_ms();
    if (scheduled_ms > 0) {  // 0: an older payload that did not say
      const auto data = DataOf<kind_data::MemoryProfileData>(d.state());
      r["server_window_ms"] = {{"start_ms", scheduled_ms}, {"end_ms", d.now_ms()},
                               {"ready_ms", data.ready().server_answered_ms() != 0
                                                ? json(data.ready().server_answered_ms())
                                                : json()}};  // null: not recorded
    }
    Record(d, "inference", r);
  } else if (task.kind == kServiceStopTask) {
    Record(d, "stopped", answer);
    // An answer that does not say is read as stopped, as ServiceOf shows it.
    const auto& stop = result.As<results::ServiceStopResult>();
    if (stop.has_stopped() && !stop.stopped() && !stop.already_gone())
      Failing(d, "the service could not be stopped: " + answer.dump(-1, ' ', false, json::error_handler_t::replace));
  } else if (task.kind == kMemWeightsTask) {
    const auto& found = result.As<results::MemoryWeightsResult>();
    if (found.weights().has_struct_value()) {
      json w = answer.at("weights");
      w["blob"] = BlobOf(task, "weight_manifest.json");
      w["file"] = "weight_manifest.json";
      Record(d, "weights", w);
    } else {
      d.Emit(kMemStepFailed, json{{"step", "weights"}, {"error_kind", "no_safetensors"},
                                  {"error", "no readable *.safetensors headers in the model dir"}});
    }
    if (found.theory().has_struct_value()) Record(d, "theory", answer.at("theory"));
    Record(d, "model_config", json{{"content", answer.value("config", json(nullptr))},
                                   {"blob", BlobOf(task, "config.json")}, {"file", "model_config.json"}});
  } else if (task.kind == kMemWaitFlushTask) {
    json r = answer;
    r["min_wait_s"] = Spec(d.state()).flush_s();
    Record(d, "flushed", r);
  } else if (task.kind == kMemExportTask) {
    for (const auto& [id, t] : d.state().timers)
      if (t.armed && t.purpose == "export_timeout") d.CancelTimer(id);
    Record(d, "export", answer);
  } else if (task.kind == kMemCollectTask) {
    json m = answer;
    const json& blobs = Field(task.result, "blobs");
    for (const char* part : {"module_mem", "npu_mem", "activation_peaks"}) {
      if (!m.contains(part) || !m[part].is_array()) continue;
      for (auto& r : m[part])
        r["blob"] = blobs.is_object() ? blobs.value("msprof_csvs/" + r.value("file", ""), "") : "";
    }
    json csv_blobs = json::object();
    if (blobs.is_object())
      for (const auto& [name, sha] : blobs.items()) csv_blobs[name] = sha;
    m["blobs"] = csv_blobs;
    const json& exp = Field(d.state().data, "export");
    m["status"] = exp.is_object() ? exp.value("status", "ok") : "not_exported";
    Record(d, "msprof", m);
  }
  Advance(d);
}

void MemoryProfileMachine::OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  const std::string step = task.payload.value("step", "");
  // A graceful stop that left the service running escalates once to SIGKILL:
  // the run never leaves a service it started behind.
  if (task.kind == kServiceStopTask && !PayloadOf<tasks::ServiceStop>(task).force() &&
      !DataOf<kind_data::MemoryProfileData>(d.state()).has_stop_escalated()) {
    Record(d, "stop_escalated", json{{"error_kind", failure.error_kind()}, {"error", failure.error()}});
    return Advance(d);
  }
  StepFailed(d, step, failure);
  if (task.kind == kMemExportTask) {
    for (const auto& [id, t] : d.state().timers)
      if (t.armed && t.purpose == "export_timeout") d.CancelTimer(id);
  }
  if (CriticalStep(d.state(), step)) {
    const bool never = task.kind == kServiceLaunchTask && LaunchStartedNothing(task);
    Failing(d, FailureText(step, failure) + (never ? " — the service was never launched (nothing to stop)" : ""));
  }
  Advance(d);
}

void MemoryProfileMachine::OnTimer(Decision& d, const TimerInfo& timer) const {
  if (timer.purpose == "flush") {
    Record(d, "flush_min", json{{"flush_s", Spec(d.state()).flush_s()}});  // next: the wait task
  } else if (timer.purpose == "export_timeout") {
    if (d.state().data.contains("export")) return;
    for (const auto& [id, t] : d.state().tasks)
      if (t.kind == kMemExportTask && (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait))
        d.Emit(ev::kTaskAbandoned, json{{"task_id", id}, {"reason", "msprof export timed out"}});
    Record(d, "export", json{{"status", "export_timeout"},
                             {"timeout_s", Spec(d.state()).export_timeout_s()}});
  }
  Advance(d);
}

bool MemoryProfileMachine::AcceptsSignal(std::string_view name) const {
  return name == ev::kSignalWatchedRunFinished;
}

void MemoryProfileMachine::OnSignal(Decision& d, const std::string& name, const json& payload) const {
  if (name != ev::kSignalWatchedRunFinished || d.state().data.contains("serve_ended")) return;
  json rec = {{"run_id", payload.value("run_id", "")}, {"status", payload.value("status", "")},
              {"state", payload.value("state", "")}};
  const json& svc = Field(Field(payload, "summary"), "service");
  if (svc.is_object()) rec["summary"] = json{{"service", svc}};
  Record(d, "serve_ended", rec);
  Advance(d);
}

void MemoryProfileMachine::OnCancel(Decision& d) const {
  d.AbandonOutstanding("run cancelled");
  Advance(d);
}

void MemoryProfileMachine::ApplyKindEvent(RunState& s, const std::string& type, const json& p) const {
  if (const std::string_view field = MemoryFieldOf(type); !field.empty()) {
    s.data[std::string(field)] = p;
  } else if (type == kMemRecorded) {
    s.data[p.value("field", "unknown")] = p.value("value", json(nullptr));
  } else if (type == kMemStepFailed) {
    s.data["step_failures"][p.value("step", "unknown")] = {{"error_kind", p.value("error_kind", "")},
                                                            {"error", p.value("error", "")}};
  } else if (type == kMemRunFailing) {
    if (!s.data.contains("failure")) s.data["failure"] = p;
  }
}

json MemoryEvidenceFromState(const RunState& s) {
  const json svc = ServiceOf(s);
  json ev = {{"mode", Mode(s)},
             {"tp", svc.value("tp", s.spec.value("tp", 1))},
             {"dp", svc.value("dp", s.spec.value("dp", 1))},
             {"devices", svc.value("devices", s.spec.value("devices", json::array()))}};
  if (!ev["devices"].is_array()) ev["devices"] = json::array();
  for (const char* f : {"baseline", "after_ready", "after_infer", "vllm_log", "msprof", "weights", "theory"})
    if (s.data.contains(f) && s.data[f].is_object()) ev[f] = s.data[f];
  if (!ev.contains("msprof")) {
    const json& exp = Field(s.data, "export");
    std::string st = Wrapped(s) ? "not_collected" : "not_wrapped";
    if (exp.is_object()) st = exp.value("status", st);
    ev["msprof"] = json{{"status", st}, {"module_mem", json::array()}, {"npu_mem", json::array()}};
  }
  return ev;
}

json MemoryProfileMachine::Summary(const RunState& s) const {
  json j = RunKind::Summary(s);
  j["mode"] = Mode(s);
  j["service"] = ServiceOf(s).empty() ? json(nullptr) : ServiceOf(s);
  if (s.data.contains("preflight")) j["wrap_script"] = s.data["preflight"].value("wrap_script", "");
  if (s.data.contains("step_failures")) j["step_failures"] = s.data["step_failures"];
  if (s.data.contains("baseline")) j["baseline"] = s.data["baseline"];
  if (s.data.contains("flushed")) j["flush"] = s.data["flushed"];
  if (Mode(s) != "install_wrapper") {
    const json report = BuildMemoryReport(MemoryEvidenceFromState(s));
    json devs = json::array();
    for (const auto& d : report["devices"]) {
      json comps = json::object();
      for (const auto& c : d["components"]) comps[c.value("key", "")] = c["value_mb"];
      devs.push_back({{"device_id", d["device_id"]}, {"hbm_used_mb", d["hbm_used_mb"]}, {"components_mb", comps}});
    }
    j["report_summary"] = {{"msprof", report["msprof"]}, {"devices", devs}};
  }
  return j;
}

json MemoryProfileMachine::Manifest(const RunState& s) const {
  return BuildMemoryManifest(s, Summary(s), BuildMemoryReport(MemoryEvidenceFromState(s)), ServiceOf(s));
}

void RegisterMemoryProfileKind(KindRegistry& r) { r.Register(std::make_unique<MemoryProfileMachine>()); }

}  // namespace npuprof::sm
