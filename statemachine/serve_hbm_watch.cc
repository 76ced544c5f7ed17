#include "statemachine/serve_hbm_watch.h"

#include <algorithm>

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

int64_t IntervalS(const RunState& s) {
  const auto* spec = dynamic_cast<const run_specs::ServeSpec*>(s.typed_spec.get());
  return spec ? spec->watch_hbm_s() : 0;
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

int64_t SamplesTaken(const RunState& s) {
  const json& w = s.data.contains("hbm_watch") ? s.data["hbm_watch"] : json(nullptr);
  kind_data::HbmWatchData data;
  return Read(w, data) ? data.samples() : 0;
}

bool SampleOut(const RunState& s) {
  for (const auto& [id, t] : s.tasks)
    if (t.kind == kServiceHbmSampleTask && (t.in_flight() || t.status == TaskStatus::kRetryWait)) return true;
  return false;
}

bool TimerArmed(const RunState& s) {
  for (const auto& [id, t] : s.timers)
    if (t.armed && t.purpose == kHbmSampleTimer) return true;
  return false;
}

void ScheduleSample(Decision& d) {
  const RunState& s = d.state();
  tasks::ServiceHbmSample p;
  const json& svc = s.data.contains("service") ? s.data["service"] : json(nullptr);
  if (svc.is_object() && svc.contains("devices") && svc["devices"].is_array())
    for (const json& dev : svc["devices"])
      if (dev.is_number_integer()) p.add_devices(dev.get<int32_t>());
  p.set_sample_no(SamplesTaken(s) + 1);
  d.Schedule(p);
}

bool Watching(const RunState& s) { return s.state == "ready" && !s.terminal && IntervalS(s) > 0; }

void ArmNext(Decision& d) {
  if (!Watching(d.state()) || TimerArmed(d.state())) return;
  d.ScheduleTimer(kHbmSampleTimer, IntervalS(d.state()) * 1000);
}

}  // namespace

void StartHbmWatch(Decision& d) {
  if (!Watching(d.state()) || SampleOut(d.state()) || TimerArmed(d.state())) return;
  ScheduleSample(d);
}

bool OnHbmSampleSucceeded(Decision& d, const TaskInfo& task, const TaskResult& result) {
  if (task.kind != kServiceHbmSampleTask) return false;
  if (!Watching(d.state())) return true;  // answered after the stop: not recorded
  const auto& r = result.As<results::ServiceHbmSampleResult>();
  const auto payload = PayloadOf<tasks::ServiceHbmSample>(task);
  if (payload.sample_no() == SamplesTaken(d.state()) + 1) {
    kind_events::HbmSampled ev;
    ev.set_sample_no(payload.sample_no());
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
  ArmNext(d);
  return true;
}

bool OnHbmSampleFailed(Decision& d, const TaskInfo& task) {
  if (task.kind != kServiceHbmSampleTask) return false;
  ArmNext(d);  // the failure is the TaskFailed event; the next sample comes at the next interval
  return true;
}

bool OnHbmSampleTimer(Decision& d, const TimerInfo& timer) {
  if (timer.purpose != kHbmSampleTimer) return false;
  if (Watching(d.state()) && !SampleOut(d.state())) ScheduleSample(d);
  return true;
}

void ApplyHbmSampled(RunState& s, const json& payload) {
  kind_events::HbmSampled ev;
  if (!Read(payload, ev)) return;  // the event's schema is judged on commit and by verify
  kind_data::HbmWatchData w;
  if (s.data.contains("hbm_watch")) Read(s.data["hbm_watch"], w);
  if (ev.sample_no() != w.samples() + 1) return;  // a sample folded already
  if (w.samples() == 0) w.set_first_t_ms(ev.t_ms());
  w.set_samples(ev.sample_no());
  w.set_last_t_ms(ev.t_ms());
  const double t_h = static_cast<double>(ev.t_ms() - w.first_t_ms()) / 3.6e6;
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
    sums.Add(t_h, static_cast<double>(dev.used_mb() - rec->first_used_mb()));
    rec->set_n(sums.n);
    rec->set_st(sums.st);
    rec->set_stt(sums.stt);
    rec->set_sy(sums.sy);
    rec->set_sty(sums.sty);
    rec->set_syy(sums.syy);
    if (rec->first_growing_sample() == 0 && EstimateHbmDrift(sums).verdict == "growing")
      rec->set_first_growing_sample(ev.sample_no());
  }
  *w.add_recent() = ev;
  if (w.recent_size() > kHbmRecentKept)
    w.mutable_recent()->DeleteSubrange(0, w.recent_size() - static_cast<int>(kHbmRecentKept));
  s.data["hbm_watch"] = MessageToJson(w);
}

json HbmWatchSummary(const RunState& s, int64_t interval_s) {
  if (interval_s <= 0 && !s.data.contains("hbm_watch")) return nullptr;
  kind_data::HbmWatchData w;
  if (s.data.contains("hbm_watch")) Read(s.data["hbm_watch"], w);
  json devices = json::array();
  std::string verdict = "steady";
  for (const auto& r : w.devices()) {
    const HbmDriftEstimate e = EstimateHbmDrift({r.n(), r.st(), r.stt(), r.sy(), r.sty(), r.syy()});
    if (e.verdict == "growing") verdict = "growing";
    devices.push_back({{"device_id", r.device_id()},
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
                       {"last_used_mb", r.last_used_mb()},
                       {"total_mb", r.total_mb()}});
  }
  json samples = json::array();
  for (const auto& ev : w.recent()) samples.push_back(MessageToJson(ev));
  return {{"interval_s", interval_s},
          {"samples", w.samples()},
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
