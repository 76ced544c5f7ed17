#include "statemachine/memory_profile_machine.h"

#include <optional>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "common/json_field.h"

#include "statemachine/event_types.h"
#include "statemachine/inference_window.h"
#include "statemachine/json_message_table.h"
#include "statemachine/kind_registrations.h"
#include "statemachine/memory_manifest.h"
#include "statemachine/memory_profile_events.h"
#include "statemachine/memory_profile_progress.h"
#include "statemachine/memory_profile_spec.h"
#include "statemachine/memory_profile_steps.h"
#include "statemachine/memory_report.h"
#include "statemachine/run_state_queries.h"
#include "statemachine/service_spec.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_result.h"
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

// The service a standalone run's spec asks for (SpecService).
tasks::ServiceLaunch StandaloneService(const RunState& s) {
  tasks::ServiceLaunch p = BuildLaunchPayload(s.run_id, 1, Spec(s), MemoryServeArgs(Spec(s)));
  p.set_served_model_name(MemoryServedName(Spec(s), s.run_id));
  return p;
}

using Data = kind_data::MemoryProfileData;
// The service record as a decision reads it: ServiceLaunched's keys plus the
// status (the serve kind's record message, which the attached run's summary
// carries too).
using ServiceRecord = kind_data::ServeData::Service;

// A step is in flight (task pending or retrying) or the flush minimum timer is armed.
bool Busy(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (t.status == TaskStatus::kPending || t.status == TaskStatus::kRetryWait) return true;
  for (const auto& [id, t] : s.timers)
    if (t.armed && t.purpose == "flush") return true;
  return false;
}

// The service this run profiles, as the document the summary and manifest
// show: its own (standalone) or the attached one.
json ServiceOf(const RunState& s, const Data& data) {
  if (Standalone(s)) {
    // The launch record says "starting"; where the service got since is
    // read from the run's own steps (ready, then the stop's result).
    json svc = s.data.value("service", json::object());
    if (!svc.is_object() || svc.empty()) return svc;
    if (data.stopped().never_started())
      svc["status"] = "never_started";
    else if (data.has_stopped())  // an answer that does not say reads as stopped
      svc["status"] = !data.stopped().has_stopped() || data.stopped().stopped() || data.stopped().already_gone()
                          ? "stopped"
                          : "failed";
    else if (data.has_ready())
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

// ServiceOf read as its message. Keys it does not declare are passed over; a
// value of the wrong type (an attached record edited elsewhere) throws,
// naming the key.
ServiceRecord RecordOf(const json& svc) {
  ServiceRecord out;
  if (!svc.is_object() || svc.empty()) return out;
  if (auto why = JsonMessageTable::Parse(svc.dump(-1, ' ', false, json::error_handler_t::replace), out,
                                         /*tolerate_unknown_keys=*/true))
    throw std::logic_error("the service record of this memory-profile run cannot be read: " + *why);
  return out;
}

// A path the record holds (a JSON string), else the fallback.
std::string PathOr(const google::protobuf::Value& v, const std::string& fallback) {
  return v.has_string_value() ? v.string_value() : fallback;
}

// What a decision reads: the run, its data and its service, decoded together.
struct View {
  const RunState& s;
  Data data;
  json service;           // ServiceOf
  ServiceRecord svc;      // the same, as its message

  explicit View(const RunState& run)
      : s(run), data(DataOf<Data>(run)), service(ServiceOf(run, data)), svc(RecordOf(service)) {}

  bool Failed(std::string_view step) const { return MemStepFailed(data, step); }
  bool Done(std::string_view step) const { return MemStepDone(data, step); }
  bool ServeEnded() const { return data.has_serve_ended(); }
  bool Wrapped() const { return Standalone(s) || !PathOr(svc.wrap_script(), "").empty(); }
  std::string MsprofDir() const { return svc.runtime_dir() + "/msprof_data"; }
  // The service's runtime dir: the record's, else the one the launch was given.
  std::string RuntimeDir() const {
    return !svc.runtime_dir().empty() ? svc.runtime_dir() : data.launch_attempted().runtime_dir();
  }
  // The attached or launched service's log: the record's path, else the
  // launch's conventional one under rt.
  std::string LogOf(const google::protobuf::Value& path, const std::string& rt, const char* file) const {
    return PathOr(path, rt + "/" + file);
  }
  std::string ServedName() const { return svc.served_model_name().empty() ? svc.model() : svc.served_model_name(); }
  std::optional<int64_t> Pid() const { return svc.has_pid() ? std::optional<int64_t>(svc.pid()) : std::nullopt; }
  bool Skipped(MemSkip why) const {
    switch (why) {
      case MemSkip::kNever: return false;
      case MemSkip::kNotLive: return ServeEnded() || Failed("ready");
      case MemSkip::kServeEnded: return ServeEnded();
      case MemSkip::kNotWrapped: return !Wrapped();
    }
    return false;
  }
  bool ExpertParallel() const {
    if (Standalone(s)) return Spec(s).enable_expert_parallel();
    for (const auto& a : svc.extra_args().values())
      if (a.string_value() == "--enable-expert-parallel") return true;
    return false;
  }
};

// View(s); nullopt, with why, when the run's data or its service record
// cannot be read (a store written with another schema).
std::optional<View> TryView(const RunState& s, std::string* why) {
  try {
    return std::optional<View>(std::in_place, s);
  } catch (const std::logic_error& e) {
    *why = e.what();
    return std::nullopt;
  }
}

// The step a memory-profile task was scheduled for (each payload carries
// it); "" for a task kind that is not one of this run kind's.
std::string StepOf(const TaskInfo& t) {
  if (t.kind == kMemPreflightTask) return PayloadOf<tasks::MemoryPreflight>(t).step();
  if (t.kind == kMemNpuSmiTask) return PayloadOf<tasks::MemoryNpuSmi>(t).step();
  if (t.kind == kServiceLaunchTask) return PayloadOf<tasks::ServiceLaunch>(t).step();
  if (t.kind == kServiceWaitReadyTask) return PayloadOf<tasks::ServiceWaitReady>(t).step();
  if (t.kind == kMemLogsTask) return PayloadOf<tasks::MemoryLogs>(t).step();
  if (t.kind == kMemInferTask) return PayloadOf<tasks::MemoryInfer>(t).step();
  if (t.kind == kServiceStopTask) return PayloadOf<tasks::ServiceStop>(t).step();
  if (t.kind == kMemWeightsTask) return PayloadOf<tasks::MemoryWeights>(t).step();
  if (t.kind == kMemWaitFlushTask) return PayloadOf<tasks::MemoryWaitFlush>(t).step();
  if (t.kind == kMemExportTask) return PayloadOf<tasks::MemoryExport>(t).step();
  if (t.kind == kMemCollectTask) return PayloadOf<tasks::MemoryCollectCsvs>(t).step();
  return "";
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

// service.launch failed before anything was started (result.started=false):
// there are no logs to read and nothing to stop.
bool LaunchNeverHappened(const RunState& s) {
  const TaskInfo* launch = LastTask(s, kServiceLaunchTask);
  return launch != nullptr && LaunchStartedNothing(*launch);
}

// ---- scheduling of each step ---------------------------------------------

void Schedule(Decision& d, const View& v, const std::string& step) {
  const RunState& s = v.s;
  const ServiceRecord& svc = v.svc;
  MoveTo(d, step);  // the run's state is the step in progress
  if (step == "preflight") {
    tasks::MemoryPreflight p;
    p.set_step(step);
    p.set_run_id(s.run_id);
    p.set_wrap_script(MemoryWrapScriptPath(MachineOf(s), s.run_id));
    p.set_msprof_mem_freq(Spec(s).msprof_mem_freq());
    d.Schedule(p);
  } else if (step == "baseline" || step == "after_ready" || step == "after_infer") {
    tasks::MemoryNpuSmi p;
    p.set_step(step);
    p.set_phase(step);
    d.Schedule(p);
  } else if (step == "service") {
    tasks::ServiceLaunch p = StandaloneService(s);
    // The script the preflight wrote, else where it writes it.
    const std::string& written = v.data.preflight().wrap_script();
    p.set_wrap_script(!written.empty() ? written : MemoryWrapScriptPath(MachineOf(s), s.run_id));
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
      p.set_runtime_dir(svc.runtime_dir());
      if (svc.has_pid()) p.set_pid(svc.pid());
      if (svc.has_port()) p.set_port(static_cast<int32_t>(svc.port()));
      p.set_served_model_name(v.ServedName());
      p.set_health_timeout_s(timeout_s);
      p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
    }
    p.set_step(step);
    d.Schedule(p);
  } else if (step == "vllm_log") {
    const std::string rt = v.RuntimeDir();
    tasks::MemoryLogs p;
    p.set_step(step);
    p.set_runtime_dir(rt);
    p.set_stdout_log(v.LogOf(svc.stdout_log(), rt, "stdout.log"));
    p.set_stderr_log(v.LogOf(svc.stderr_log(), rt, "stderr.log"));
    d.Schedule(p);
  } else if (step == "inference") {
    tasks::MemoryInfer p;
    p.set_step(step);
    if (svc.has_port()) p.set_port(static_cast<int32_t>(svc.port()));
    p.set_served_model_name(v.ServedName());
    p.set_prompt(Spec(s).prompt());
    if (Spec(s).has_image_url()) p.set_image_url(Spec(s).image_url());
    p.set_max_tokens(Spec(s).max_tokens());
    p.set_timeout_s(600);
    p.set_server_scheduled_ms(d.now_ms());
    d.Schedule(p);
  } else if (step == "stopped") {
    // Forced (SIGKILL) on cancel, or after a graceful stop left it running.
    const bool force = s.cancel_requested || v.data.has_stop_escalated();
    // A standalone step (memory_profile_steps.cc): the spec holds stop_grace_s.
    tasks::ServiceStop p = BuildStopPayload(v.RuntimeDir(), v.Pid(), force, Spec(s).stop_grace_s());
    // The graceful stop already sent SIGINT and SIGTERM and waited out both
    // graces: the escalation goes straight to SIGKILL (a hung msprof would
    // otherwise cost both graces again).
    if (v.data.stop_escalated().error_kind() == "still_running") p.set_kill_at_once(true);
    p.set_step(step);
    d.Schedule(p);
  } else if (step == "weights") {
    // The service's model and parallel sizes, else the spec's (standalone
    // fills them; an attached record names them).
    const auto or_spec = [](int64_t from_service, int64_t from_spec) {
      return static_cast<int32_t>(from_service != 0 ? from_service : from_spec != 0 ? from_spec : 1);
    };
    tasks::MemoryWeights p;
    p.set_step(step);
    p.set_model(!svc.model().empty() ? svc.model() : Spec(s).model());
    p.set_tp(or_spec(svc.tp(), Spec(s).tp()));
    p.set_dp(or_spec(svc.dp(), Spec(s).dp()));
    p.set_expert_parallel(v.ExpertParallel());
    d.Schedule(p);
  } else if (step == "flushed") {
    // flush_s is a minimum before the wait polls (0 = none); the wait itself
    // ends on msprof's own completion signals, or at its deadline.
    const int64_t min_s = Spec(s).flush_s();
    if (min_s > 0 && !v.data.has_flush_min()) {
      d.ScheduleTimer("flush", min_s * 1000);
      return;
    }
    const int64_t timeout_s = Spec(s).flush_timeout_s();
    const std::string& rt = svc.runtime_dir();
    tasks::MemoryWaitFlush p;
    p.set_step(step);
    p.set_msprof_dir(v.MsprofDir());
    p.set_runtime_dir(rt);
    if (svc.has_pid()) p.set_pid(svc.pid());
    p.set_stdout_log(v.LogOf(svc.stdout_log(), rt, "stdout.log"));
    p.set_timeout_s(timeout_s);
    p.set_deadline_ms(d.now_ms() + timeout_s * 1000);
    d.Schedule(p);
  } else if (step == "export") {
    const int64_t timeout_s = Spec(s).export_timeout_s();
    tasks::MemoryExport p;
    p.set_step(step);
    p.set_msprof_dir(v.MsprofDir());
    p.set_timeout_s(timeout_s + 60);
    d.Schedule(p);
    d.ScheduleTimer("export_timeout", timeout_s * 1000);
  } else if (step == "msprof") {
    tasks::MemoryCollectCsvs p;
    p.set_step(step);
    p.set_msprof_dir(v.MsprofDir());
    // The window the handler cuts each device's npu_mem series at (the
    // activation peak); absent when the inference gave none.
    if (auto w = ChooseInferenceWindow(Field(s.data, "inference"))) *p.mutable_inference_window() = ChosenWindowToMessage(*w);
    d.Schedule(p);
  }
}

// The cancel of a run whose data cannot be read: no step can be judged from
// the evidence, but what the launch may have started is still stopped (once,
// forced: the launch's runtime dir, its recorded pid if it can be read, else
// the handler reads the pid file), and the run ends cancelled.
void CancelUnread(Decision& d, const std::string& why) {
  const RunState& s = d.state();
  const TaskInfo* launch = Standalone(s) ? LastTask(s, kServiceLaunchTask) : nullptr;
  if (launch != nullptr && !LaunchStartedNothing(*launch) && LastTask(s, kServiceStopTask) == nullptr) {
    std::string rt = PayloadOf<tasks::ServiceLaunch>(*launch).runtime_dir();
    std::optional<int64_t> pid;
    if (auto r = RecordedResult<results::ServiceLaunchResult>(*launch); r.ok()) {
      if (!r->runtime_dir().empty()) rt = r->runtime_dir();
      if (r->pid() != 0) pid = r->pid();
    }
    MoveTo(d, "stopped");
    tasks::ServiceStop p = BuildStopPayload(rt, pid, /*force=*/true, Spec(s).stop_grace_s());
    p.set_step("stopped");
    (void)d.Schedule(p);
    return;
  }
  d.Finish(RunStatus::kCancelled, "cancelled; the run's evidence could not be read: " + why);
}

// The planner: schedules the next missing step, or finishes. It reads the
// run's data after the events the decision emitted so far (one decode here;
// the handlers that read it before recording decode once more).
void Advance(Decision& d) {
  const RunState& s = d.state();
  if (s.terminal || Busy(s) || d.failed()) return;
  std::string why;
  const std::optional<View> read = TryView(s, &why);
  if (!read) {
    // A decision fails its input (the broker then cancels the run); the
    // cancel must still end the run and stop its service.
    if (!s.cancel_requested) throw std::logic_error(why);
    return CancelUnread(d, why);
  }
  const View& v = *read;
  const bool launched = Standalone(s) && v.data.has_launch_attempted() && !LaunchNeverHappened(s);

  if (v.data.has_failure() || s.cancel_requested) {
    for (const MemStep& step : MemoryStepsOf(Mode(s))) {
      const bool runs = step.cleanup == MemCleanup::kOnFailureOrCancel ||
                        (step.cleanup == MemCleanup::kOnFailure && !s.cancel_requested);
      if (launched && runs && !v.Done(step.name)) return Schedule(d, v, std::string(step.name));
    }
    if (s.cancel_requested) return d.Finish(RunStatus::kCancelled, "cancelled by request");
    std::string err = v.data.failure().error().empty() ? "memory-profile failed" : v.data.failure().error();
    if (v.data.stopped().never_started()) err += " — the service was never launched";
    return d.Finish(RunStatus::kFailed, err);
  }

  for (const MemStep& step : MemoryStepsOf(Mode(s))) {
    if (v.Skipped(step.skip)) continue;
    if (step.wait) return MoveTo(d, std::string(step.name));
    if (!v.Done(step.name)) return Schedule(d, v, std::string(step.name));
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

std::optional<tasks::ServiceLaunch> MemoryProfileMachine::SpecService(const RunState& s) const {
  if (!Standalone(s)) return std::nullopt;
  return StandaloneService(s);
}

void MemoryProfileMachine::OnStart(Decision& d) const {
  const RunState& s = d.state();
  if (!Standalone(s)) {
    json b = BaselineFromSpec(s);
    if (!b.is_null()) Record(d, "baseline", b);
  }
  if (Mode(s) == "attach") {
    // The serve run's record as the broker added it at submit: it had ended
    // when it names when.
    const auto& rec = Spec(s).attach_run_record().fields();
    const auto text = [&rec](const char* key) -> std::optional<std::string> {
      const auto it = rec.find(key);
      if (it == rec.end() || !it->second.has_string_value()) return std::nullopt;
      return it->second.string_value();
    };
    if (text("finished_at"))
      Record(d, "serve_ended", json{{"run_id", Spec(s).attach_run()}, {"status", text("status").value_or("")},
                                    {"state", text("state").value_or("")}, {"at_submit", true}});
    else
      d.WatchRun(Spec(s).attach_run());
  }
  Advance(d);
}

void MemoryProfileMachine::OnTaskSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) const {
  const std::string step = StepOf(task);
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
      const auto data = DataOf<Data>(d.state());
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
    const auto data = DataOf<Data>(d.state());
    m["status"] = !data.has_export_()                ? "not_exported"
                  : data.export_().status().empty() ? "ok"
                                                    : data.export_().status();
    Record(d, "msprof", m);
  }
  Advance(d);
}

void MemoryProfileMachine::OnTaskFailed(Decision& d, const TaskInfo& task, const TaskFailure& failure) const {
  const std::string step = StepOf(task);
  // A graceful stop that left the service running escalates once to SIGKILL:
  // the run never leaves a service it started behind.
  if (task.kind == kServiceStopTask && !PayloadOf<tasks::ServiceStop>(task).force() &&
      !DataOf<Data>(d.state()).has_stop_escalated()) {
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

namespace {

// The report's input (memory_report.h) from what one projection decoded.
json EvidenceOf(const View& v) {
  const RunState& s = v.s;
  // The service's parallel sizes and devices, else the spec's.
  const auto or_spec = [](int64_t from_service, int64_t from_spec) {
    return from_service != 0 ? from_service : from_spec != 0 ? from_spec : 1;
  };
  json devices = Field(v.service, "devices");
  if (!devices.is_array()) devices = Field(s.spec, "devices");
  json ev = {{"mode", Mode(s)},
             {"tp", or_spec(v.svc.tp(), Spec(s).tp())},
             {"dp", or_spec(v.svc.dp(), Spec(s).dp())},
             {"devices", devices.is_array() ? devices : json::array()}};
  for (const char* f : {"baseline", "after_ready", "after_infer", "vllm_log", "msprof", "weights", "theory"})
    if (s.data.contains(f) && s.data[f].is_object()) ev[f] = s.data[f];
  if (!ev.contains("msprof")) {
    std::string st = v.Wrapped() ? "not_collected" : "not_wrapped";
    if (v.data.has_export_() && !v.data.export_().status().empty()) st = v.data.export_().status();
    ev["msprof"] = json{{"status", st}, {"module_mem", json::array()}, {"npu_mem", json::array()}};
  }
  return ev;
}

json SummaryOf(const MemoryProfileMachine& kind, const View& v) {
  const RunState& s = v.s;
  json j = kind.RunKind::Summary(s);
  j["mode"] = Mode(s);
  j["service"] = v.service.empty() ? json(nullptr) : v.service;
  if (v.data.has_preflight()) j["wrap_script"] = v.data.preflight().wrap_script();
  if (s.data.contains("step_failures")) j["step_failures"] = s.data["step_failures"];
  if (s.data.contains("baseline")) j["baseline"] = s.data["baseline"];
  if (s.data.contains("flushed")) j["flush"] = s.data["flushed"];
  if (Mode(s) != "install_wrapper") {
    const json report = BuildMemoryReport(EvidenceOf(v));
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

}  // namespace

json MemoryEvidenceFromState(const RunState& s) { return EvidenceOf(View(s)); }

json MemoryProfileMachine::Summary(const RunState& s) const { return SummaryOf(*this, View(s)); }

json MemoryProfileMachine::Manifest(const RunState& s) const {
  const View v(s);
  return BuildMemoryManifest(s, SummaryOf(*this, v), BuildMemoryReport(EvidenceOf(v)), v.service);
}

void RegisterMemoryProfileKind(KindRegistry& r) { r.Register(std::make_unique<MemoryProfileMachine>()); }

}  // namespace npuprof::sm
