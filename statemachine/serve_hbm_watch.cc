#include "statemachine/serve_hbm_watch.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include <google/protobuf/util/json_util.h>

#include "kind_data.pb.h"
#include "kind_events.pb.h"
#include "run_specs.pb.h"
#include "task_payloads.pb.h"
#include "task_results.pb.h"
#include "statemachine/hbm_drift.h"
#include "statemachine/message_json.h"
#include "statemachine/task_payload.h"
#include "statemachine/task_result.h"
#include "statemachine/typed_spec.h"

namespace npuprof::sm {

namespace {

namespace pb = google::protobuf;

double IntervalS(const RunState& s) {
  const auto* spec = dynamic_cast<const run_specs::ServeSpec*>(s.typed_spec.get());
  return spec ? spec->watch_hbm_s() : 0;
}

// The interval in whole milliseconds (the timer's unit).
int64_t IntervalMs(const RunState& s) { return std::llround(IntervalS(s) * 1000); }

bool WithWorkload(const RunState& s) {
  const auto* spec = dynamic_cast<const run_specs::ServeSpec*>(s.typed_spec.get());
  return spec && spec->watch_workload();
}

// Reads a JSON document into m (keys m does not declare passed over); false
// when it does not decode.
bool Read(const json& j, pb::Message& m) {
  if (!j.is_object()) return false;
  pb::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  const std::string text = j.dump();
  return pb::util::JsonStringToMessage(pb::StringPiece(text.data(), text.size()), &m, o).ok();
}

// The watch's data without its kept samples (`recent`, the bulk of it, left
// out of the decode: a sample's decision and fold read only the counts and
// the sums, so their cost does not depend on how many samples are kept);
// false when there is none or it does not decode.
bool ReadCounts(const RunState& s, kind_data::HbmWatchData& out) {
  const auto it = s.data.find("hbm_watch");
  if (it == s.data.end() || !it->is_object()) return false;
  json counts = json::object();
  for (const auto& [k, v] : it->items())
    if (k != "recent") counts[k] = v;
  return Read(counts, out);
}

int64_t SamplesTaken(const RunState& s) {
  kind_data::HbmWatchData data;
  return ReadCounts(s, data) ? data.samples() : 0;
}

bool SampleOut(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if ((t.kind == kServiceHbmSampleTask || t.kind == kHbmWaveTask) &&
        (t.in_flight() || t.status == TaskStatus::kRetryWait))
      return true;
  return false;
}

// Requests answered before the last sample folded (0 without samples): where
// a watch that starts again (ready after a stop that left the service
// running) counts on from.
int64_t FoldedRequests(const RunState& s) {
  kind_data::HbmWatchData data;
  return ReadCounts(s, data) ? data.last_requests() : 0;
}

// --watch-workload: the wave of chat requests before a sample; its
// first_index is the count so far (requests numbered on across waves).
void ScheduleWave(Decision& d, int64_t requests) {
  const RunState& s = d.state();
  const json& svc = s.data.contains("service") ? s.data["service"] : json(nullptr);
  tasks::TorchProfileRequests w;
  w.set_role("wave");
  w.set_port(svc.is_object() && svc.contains("port") && svc["port"].is_number_integer() ? svc["port"].get<int32_t>()
                                                                                        : 0);
  w.set_served_model_name(svc.is_object() && svc.contains("served_model_name") && svc["served_model_name"].is_string()
                              ? svc["served_model_name"].get<std::string>()
                              : "");
  w.set_total(kHbmWaveRequests);
  w.set_concurrency(kHbmWaveConcurrency);
  w.set_first_index(requests);
  w.set_prompt_tokens(32);
  w.set_max_tokens(8);
  w.set_timeout_s(60);
  w.set_request_kind("text");
  d.Schedule(w);
}

bool TimerArmed(const RunState& s) {
  for (const auto& [id, t] : s.timers)
    if (t.armed && t.purpose == kHbmSampleTimer) return true;
  return false;
}

void ScheduleSample(Decision& d, int64_t requests) {
  const RunState& s = d.state();
  tasks::ServiceHbmSample p;
  p.set_requests(requests);
  const json& svc = s.data.contains("service") ? s.data["service"] : json(nullptr);
  if (svc.is_object() && svc.contains("devices") && svc["devices"].is_array())
    for (const json& dev : svc["devices"])
      if (dev.is_number_integer()) p.add_devices(dev.get<int32_t>());
  p.set_sample_no(SamplesTaken(s) + 1);
  d.Schedule(p);
}

bool Watching(const RunState& s) { return s.state == "ready" && !s.terminal && IntervalS(s) > 0; }

// The next step of the cycle (requests: answered so far): the wave first
// with --watch-workload, else the sample.
void ScheduleNext(Decision& d, int64_t requests) {
  if (WithWorkload(d.state())) return ScheduleWave(d, requests);
  ScheduleSample(d, requests);
}

// The timer of the next cycle carries the count on.
void ArmNext(Decision& d, int64_t requests) {
  if (!Watching(d.state()) || TimerArmed(d.state())) return;
  d.ScheduleTimer(kHbmSampleTimer, IntervalMs(d.state()), json{{"requests", requests}});
}

}  // namespace

void StartHbmWatch(Decision& d) {
  if (!Watching(d.state()) || SampleOut(d.state()) || TimerArmed(d.state())) return;
  ScheduleNext(d, FoldedRequests(d.state()));
}

bool OnHbmWaveAnswered(Decision& d, const TaskInfo& task, int64_t ok_count) {
  if (task.kind != kHbmWaveTask) return false;
  if (!Watching(d.state())) return true;
  const int64_t before = PayloadOf<tasks::TorchProfileRequests>(task).first_index();
  ScheduleSample(d, before + std::max<int64_t>(ok_count, 0));
  return true;
}

bool OnHbmSampleSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) {
  if (task.kind == kHbmWaveTask)
    return OnHbmWaveAnswered(d, task, result.As<results::TorchProfileRequestsResult>().ok_count());
  if (task.kind != kServiceHbmSampleTask) return false;
  if (!Watching(d.state())) return true;  // answered after the stop: not recorded
  const auto& r = result.As<results::ServiceHbmSampleResult>();
  const auto payload = PayloadOf<tasks::ServiceHbmSample>(task);
  if (payload.sample_no() == SamplesTaken(d.state()) + 1) {
    kind_events::HbmSampled ev;
    ev.set_sample_no(payload.sample_no());
    ev.set_requests(payload.requests());
    ev.set_t_ms(r.t_ms());
    ev.set_clock(r.clock());
    for (const auto& dev : r.devices()) {
      auto* out = ev.add_devices();
      out->set_device_id(dev.device_id());
      out->set_used_mb(dev.used_mb());
      out->set_total_mb(dev.total_mb());
    }
    d.Emit(kHbmSampled, MessageToJson(ev));
  }
  ArmNext(d, payload.requests());
  return true;
}

bool OnHbmSampleFailed(Decision& d, const TaskInfo& task) {
  if (task.kind == kHbmWaveTask) return OnHbmWaveAnswered(d, task, 0);  // sampled all the same
  if (task.kind != kServiceHbmSampleTask) return false;
  // The failure is the TaskFailed event; the next sample comes at the next interval.
  ArmNext(d, PayloadOf<tasks::ServiceHbmSample>(task).requests());
  return true;
}

bool OnHbmSampleTimer(Decision& d, const TimerInfo& timer) {
  if (timer.purpose != kHbmSampleTimer) return false;
  const json& n = timer.payload.contains("requests") ? timer.payload["requests"] : json(nullptr);
  if (Watching(d.state()) && !SampleOut(d.state()))
    ScheduleNext(d, n.is_number_integer() ? n.get<int64_t>() : FoldedRequests(d.state()));
  return true;
}

Status CheckHbmWatchInterval(json& spec) {
  if (!spec.contains("watch_hbm_s") || spec["watch_hbm_s"].is_null()) {
    spec["watch_hbm_s"] = 0;
    return Status::Ok();
  }
  const json& v = spec["watch_hbm_s"];
  const auto range = fmt::format("0 (off) or {}..{} seconds", kHbmWatchMinIntervalS, kHbmWatchMaxIntervalS);
  if (!v.is_number())
    return Status::Invalid(fmt::format("watch_hbm_s must be a number of seconds (CLI: --watch-hbm 60, or 0.5): {}",
                                       range));
  const double s = v.get<double>();
  if (s == 0) return Status::Ok();
  if (!(s >= kHbmWatchMinIntervalS && s <= kHbmWatchMaxIntervalS))
    return Status::Invalid(fmt::format("watch_hbm_s = {} is out of range: use {}", v.dump(), range));
  return Status::Ok();
}

bool HbmWatchForgetsTask(std::string_view task_kind) {
  return task_kind == kServiceHbmSampleTask || task_kind == kHbmWaveTask;
}

void ApplyHbmSampled(RunState& s, const json& payload) {
  kind_events::HbmSampled ev;
  if (!Read(payload, ev)) return;  // the event's schema is judged on commit and by verify
  kind_data::HbmWatchData w;
  ReadCounts(s, w);
  if (ev.sample_no() != w.samples() + 1) return;  // a sample folded already
  if (w.samples() == 0) {
    w.set_first_t_ms(ev.t_ms());
    w.set_first_requests(ev.requests());
  }
  w.set_samples(ev.sample_no());
  w.set_last_t_ms(ev.t_ms());
  w.set_last_requests(ev.requests());
  const double t_h = static_cast<double>(ev.t_ms() - w.first_t_ms()) / 3.6e6;
  const double r = static_cast<double>(ev.requests() - w.first_requests());
  for (const auto& dev : ev.devices()) {
    kind_data::HbmWatchData::Device* rec = nullptr;
    for (auto& r : *w.mutable_devices())
      if (r.device_id() == dev.device_id()) rec = &r;
    if (rec == nullptr) {
      rec = w.add_devices();
      rec->set_device_id(dev.device_id());
      rec->set_first_used_mb(dev.used_mb());
    }
    rec->set_last_used_mb(dev.used_mb());
    rec->set_total_mb(dev.total_mb());
    HbmDriftSums sums{rec->n(), rec->st(), rec->stt(), rec->sy(), rec->sty(), rec->syy()};
    const double y = static_cast<double>(dev.used_mb() - rec->first_used_mb());
    sums.Add(t_h, y);
    rec->set_sr(rec->sr() + r);
    rec->set_srr(rec->srr() + r * r);
    rec->set_sry(rec->sry() + r * y);
    rec->set_n(sums.n);
    rec->set_st(sums.st);
    rec->set_stt(sums.stt);
    rec->set_sy(sums.sy);
    rec->set_sty(sums.sty);
    rec->set_syy(sums.syy);
    if (rec->first_growing_sample() == 0 && EstimateHbmDrift(sums).verdict == "growing")
      rec->set_first_growing_sample(ev.sample_no());
  }
  // The kept samples stay JSON (each written once, as its message): the
  // newest appended, the oldest beyond kHbmRecentKept dropped.
  json& slot = s.data["hbm_watch"];
  json recent = slot.is_object() && slot.contains("recent") && slot["recent"].is_array() ? std::move(slot["recent"])
                                                                                          : json::array();
  recent.push_back(MessageToJson(ev));
  if (const auto n = static_cast<int64_t>(recent.size()); n > kHbmRecentKept)
    recent.erase(recent.begin(), recent.begin() + (n - kHbmRecentKept));
  json out = MessageToJson(w);
  out["recent"] = std::move(recent);
  slot = std::move(out);
}

json HbmWatchSummary(const RunState& s, double interval_s) {
  if (interval_s <= 0 && !s.data.contains("hbm_watch")) return nullptr;
  kind_data::HbmWatchData w;
  if (s.data.contains("hbm_watch")) Read(s.data["hbm_watch"], w);
  json devices = json::array();
  std::string verdict = "steady";
  for (const auto& r : w.devices()) {
    const HbmDriftEstimate e = EstimateHbmDrift({r.n(), r.st(), r.stt(), r.sy(), r.sty(), r.syy()});
    if (e.verdict == "growing") verdict = "growing";
    // Against requests answered (--watch-workload): the same fit, MB per request.
    json per_request = nullptr;
    if (w.last_requests() > w.first_requests()) {
      const HbmDriftEstimate q = EstimateHbmDrift({r.n(), r.sr(), r.srr(), r.sy(), r.sry(), r.syy()});
      per_request = {{"mb_per_request", q.slope_mb_per_h}, {"lower", q.lower_mb_per_h}, {"upper", q.upper_mb_per_h}};
    }
    devices.push_back({{"device_id", r.device_id()},
                       {"per_request", per_request},
                       {"samples", e.samples},
                       {"slope_mb_per_h", e.slope_mb_per_h},
                       {"stderr_mb_per_h", e.stderr_mb_per_h},
                       {"lower_mb_per_h", e.lower_mb_per_h},
                       {"upper_mb_per_h", e.upper_mb_per_h},
                       {"verdict", e.verdict},
                       {"text", HbmDriftText(e)},
                       {"first_growing_sample", r.first_growing_sample() > 0 ? json(r.first_growing_sample())
                                                                             : json(nullptr)},
                       {"first_used_mb", r.first_used_mb()},
                       // The fitted line at the first sample's time (MB used): with the
                       // slope, the line the HTML view draws through the samples.
                       {"fit_first_used_mb", static_cast<double>(r.first_used_mb()) + e.intercept_mb},
                       {"last_used_mb", r.last_used_mb()},
                       {"total_mb", r.total_mb()}});
  }
  json samples = json::array();
  for (const auto& ev : w.recent()) samples.push_back(MessageToJson(ev));
  const json interval = interval_s == std::floor(interval_s) && interval_s < 1e15
                            ? json(static_cast<int64_t>(interval_s))
                            : json(interval_s);
  return {{"interval_s", interval},
          {"samples", w.samples()},
          {"requests", w.last_requests() - w.first_requests()},
          {"first_t_ms", w.samples() > 0 ? json(w.first_t_ms()) : json(nullptr)},
          {"last_t_ms", w.samples() > 0 ? json(w.last_t_ms()) : json(nullptr)},
          {"confidence", kHbmDriftConfidence},
          {"threshold_mb_per_h", kHbmDriftThresholdMbPerH},
          {"min_samples", kHbmDriftMinSamples},
          {"verdict", verdict},
          {"devices", devices},
          {"recent", samples}};
}

}  // namespace npuprof::sm
