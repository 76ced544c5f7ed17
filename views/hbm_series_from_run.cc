#include "views/hbm_series_from_run.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "parsers/msprof_csv_parser.h"
#include "statemachine/activation_peak.h"
#include "views/html_page.h"

namespace npuprof::views {

using nlohmann::json;

namespace {

// Per task id: kind, payload, result, blobs and the times it was scheduled
// and answered (ms on the server's clock; -1 = not in the log).
struct TaskTimes {
  std::string kind;
  json payload;
  json result;
  json blobs;
  double scheduled_ms = -1;
  double answered_ms = -1;
  uint64_t order = 0;  // position of its TaskScheduled in the log
};

std::map<std::string, TaskTimes> Tasks(const json& events_doc) {
  std::map<std::string, TaskTimes> out;
  const json& events = events_doc.is_array() ? events_doc : Field(events_doc, "events");
  if (!events.is_array()) return out;
  uint64_t n = 0;
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const json& type = Field(e, "type");
    const json& p = Field(e, "payload");
    const json& id = Field(p, "task_id");
    const json& t = Field(e, "time_ms");
    if (!type.is_string() || !id.is_string() || !t.is_number()) continue;
    TaskTimes& task = out[id.get<std::string>()];
    if (type == "TaskScheduled") {
      task.kind = Field(p, "kind").is_string() ? p["kind"].get<std::string>() : "";
      task.payload = Field(p, "payload");
      task.scheduled_ms = t.get<double>();
      task.order = ++n;
    } else if (type == "TaskSucceeded") {
      task.result = Field(p, "result");
      task.blobs = Field(p, "blobs");
      task.answered_ms = t.get<double>();
    }
  }
  // A memory.wait_flush that also collected the CSVs (its result's
  // `collected`, its payload's `collect`) is read as the memory.collect_csvs
  // it stands for.
  std::map<std::string, TaskTimes> folded;
  for (const auto& [id, t] : out) {
    if (t.kind != "memory.wait_flush" || t.answered_ms < 0 || !Field(t.result, "collected").is_object()) continue;
    TaskTimes c = t;
    c.kind = "memory.collect_csvs";
    c.result = Field(t.result, "collected");
    c.payload = Field(t.payload, "collect").is_object() ? Field(t.payload, "collect") : json::object();
    if (Field(t.payload, "machine").is_object()) c.payload["machine"] = Field(t.payload, "machine");
    folded.emplace(id + "/collected", std::move(c));
  }
  out.merge(folded);
  return out;
}

// The last task of `kind` that succeeded.
const TaskTimes* LastSucceeded(const std::map<std::string, TaskTimes>& tasks, const std::string& kind) {
  const TaskTimes* best = nullptr;
  for (const auto& [id, t] : tasks)
    if (t.kind == kind && t.answered_ms >= 0 && (!best || t.order > best->order)) best = &t;
  return best;
}

// The run's machines as its submission names them (the head first; every
// node of a deployment, in node order) and each one's clock offset as the
// run's machine.clock measured it (ClockMeasured: the start's, else the end's).
struct RunNodes {
  std::string head;
  std::vector<std::string> machines;  // more than one: a deployment over several machines
  std::map<std::string, double> offset_ms;
};

RunNodes NodesOf(const json& events_doc) {
  RunNodes out;
  const json& events = events_doc.is_array() ? events_doc : Field(events_doc, "events");
  if (!events.is_array()) return out;
  std::map<std::string, std::map<std::string, double>> measured;  // when -> machine -> offset
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const json& p = Field(e, "payload");
    if (Field(e, "type") == "RunSubmitted" && out.head.empty()) {
      out.head = StrField(p, "machine");
      for (const auto& n : ArrField(Field(p, "spec"), "nodes")) {
        const std::string m = StrField(n, "machine");
        if (!m.empty() && std::find(out.machines.begin(), out.machines.end(), m) == out.machines.end())
          out.machines.push_back(m);
      }
    } else if (Field(e, "type") == "ClockMeasured") {
      const std::string when = StrField(p, "when", "start") == "end" ? "end" : "start";
      for (const auto& o : ArrField(p, "offsets")) {
        const auto off = NumField(o, "offset_ms");
        if (off && std::isfinite(*off) && !Field(o, "error").is_string())
          measured[when][StrField(o, "machine")] = *off;
      }
    }
  }
  for (const char* when : {"end", "start"})  // the start's wins
    for (const auto& [m, off] : measured[when]) out.offset_ms[m] = off;
  return out;
}

bool Deployment(const RunNodes& n) { return n.machines.size() > 1; }

// The last memory.collect_csvs of `machine` that succeeded (a task without
// a machine of its own ran on the head).
const TaskTimes* CollectOn(const std::map<std::string, TaskTimes>& tasks, const std::string& machine,
                           const std::string& head) {
  const TaskTimes* best = nullptr;
  for (const auto& [id, t] : tasks) {
    if (t.kind != "memory.collect_csvs" || t.answered_ms < 0 || (best && t.order < best->order)) continue;
    const json& name = Field(Field(t.payload, "machine"), "name");
    if (name.is_string() ? name == machine : machine == head) best = &t;
  }
  return best;
}

// The head's last memory.collect_csvs that succeeded (the run's machine; a
// run over several machines collects on every node).
const TaskTimes* HeadCollect(const json& events_doc, const std::map<std::string, TaskTimes>& tasks) {
  const std::string head = NodesOf(events_doc).head;
  const TaskTimes* best = head.empty() ? nullptr : CollectOn(tasks, head, head);
  return best ? best : LastSucceeded(tasks, "memory.collect_csvs");
}

// The collect's rows as CSVs to fetch (each device's "Device" series), with
// their machine ("" for a run on one machine); at most kMaxNpuMemCsvs in all.
void AddCsvsOf(const TaskTimes& collect, const std::string& machine, std::vector<NpuMemCsv>& out) {
  const json& rows = Field(collect.result, "npu_mem");
  for (const auto& [dev, file] : sm::DeviceSeriesFiles(rows)) {
    if (out.size() >= kMaxNpuMemCsvs) break;
    const json& sha = Field(collect.blobs, ("msprof_csvs/" + file).c_str());
    if (!sha.is_string()) continue;
    out.push_back({file, sha.get<std::string>(), dev, "", machine});
  }
}

// The memory.infer record as the kind folds it: result + server window
// (with the ready instant: when the last service.wait_ready answered).
json InferenceRecord(const std::map<std::string, TaskTimes>& tasks, const TaskTimes& infer) {
  json rec = infer.result.is_object() ? infer.result : json::object();
  if (infer.scheduled_ms < 0) return rec;
  rec["server_window_ms"] = {{"start_ms", infer.scheduled_ms}, {"end_ms", infer.answered_ms}};
  if (const TaskTimes* ready = LastSucceeded(tasks, "service.wait_ready"))
    rec["server_window_ms"]["ready_ms"] = ready->answered_ms;
  return rec;
}

}  // namespace

std::vector<NpuMemCsv> NpuMemCsvsOfRun(const json& events_doc) {
  std::vector<NpuMemCsv> out;
  const auto tasks = Tasks(events_doc);
  const RunNodes nodes = NodesOf(events_doc);
  if (Deployment(nodes)) {
    for (const std::string& m : nodes.machines)
      if (const TaskTimes* collect = CollectOn(tasks, m, nodes.head)) AddCsvsOf(*collect, m, out);
    return out;
  }
  if (const TaskTimes* collect = HeadCollect(events_doc, tasks)) AddCsvsOf(*collect, "", out);
  return out;
}

std::optional<sm::ChosenWindow> InferenceWindowOfRun(const json& events_doc) {
  const auto tasks = Tasks(events_doc);
  if (const TaskTimes* collect = HeadCollect(events_doc, tasks))
    if (auto w = sm::ChosenWindowFromJson(Field(collect->payload, "inference_window"))) return w;
  if (const TaskTimes* infer = LastSucceeded(tasks, "memory.infer"))
    return sm::ChooseInferenceWindow(InferenceRecord(tasks, *infer));
  return std::nullopt;
}

double TargetClockOffsetUs(const json& events_doc) {
  const auto tasks = Tasks(events_doc);
  const TaskTimes* infer = LastSucceeded(tasks, "memory.infer");
  if (!infer || infer->scheduled_ms < 0) return 0;
  const auto w = sm::ChooseInferenceWindow(InferenceRecord(tasks, *infer));
  if (!w || w->clock != "target") return 0;
  const double target_mid = (w->window.start_us + w->window.end_us) / 2.0;
  const double server_mid = (infer->scheduled_ms + infer->answered_ms) * 1000.0 / 2.0;
  return target_mid - server_mid;
}

std::vector<PhaseMarker> PhasesOfRun(const json& events_doc) {
  std::vector<PhaseMarker> out;
  const double off = TargetClockOffsetUs(events_doc);
  for (const auto& [id, t] : Tasks(events_doc)) {
    const double s = t.scheduled_ms * 1000.0 + off, a = t.answered_ms * 1000.0 + off;
    if (t.kind == "memory.npu_smi" && Field(t.payload, "phase") == "baseline" && t.answered_ms >= 0)
      out.push_back({"baseline", a, std::nullopt});
    else if (t.kind == "service.launch" && t.scheduled_ms >= 0)
      out.push_back({"launch", s, std::nullopt});
    else if (t.kind == "service.wait_ready" && t.answered_ms >= 0)
      out.push_back({"ready", a, std::nullopt});
    else if (t.kind == "service.stop" && t.scheduled_ms >= 0)
      out.push_back({"stop", s, t.answered_ms >= 0 ? std::optional<double>(a) : std::nullopt});
  }
  if (auto w = InferenceWindowOfRun(events_doc)) out.push_back({"inference", w->window.start_us, w->window.end_us});
  return out;
}

HbmSeriesSet HbmSeriesSetFromRun(const json& events_doc, const std::vector<NpuMemCsv>& csvs) {
  HbmSeriesSet set;
  set.phases = PhasesOfRun(events_doc);
  const RunNodes nodes = NodesOf(events_doc);
  const auto tasks = Tasks(events_doc);
  const auto head_window = InferenceWindowOfRun(events_doc);
  // The window each machine's series is cut at: the one its own collect was
  // given (on its clock), else the head's.
  const auto window_of = [&](const std::string& machine) {
    if (machine.empty()) return head_window;
    if (const TaskTimes* c = CollectOn(tasks, machine, nodes.head))
      if (auto w = sm::ChosenWindowFromJson(Field(c->payload, "inference_window"))) return w;
    return head_window;
  };
  // (machine, device) -> its "Device" series with the most samples.
  std::map<std::pair<std::string, int>, DeviceHbmSeries> best;
  for (const auto& csv : csvs) {
    if (csv.text.size() > kMaxNpuMemCsvBytes) continue;
    auto table = ParseNpuMemCsv(csv.text);
    if (!table.ok()) continue;
    for (const auto& s : table->series) {
      const std::optional<int> dev = s.device_id ? s.device_id : csv.device_id;
      if (s.event != "Device" || !dev) continue;
      const auto key = std::make_pair(csv.machine, *dev);
      auto it = best.find(key);
      if (it != best.end() && it->second.samples.size() >= s.samples.size()) continue;
      DeviceHbmSeries d{*dev, csv.machine, s.event, "msprof_csvs/" + csv.file, csv.blob, {}};
      for (const auto& p : s.samples) d.samples.push_back({p.timestamp_us, p.hbm_mb, p.data_row});
      best[key] = std::move(d);
    }
  }
  // A deployment whose clocks were measured: every node onto npuprof's clock
  // by its own offset; a node not measured is taken to be on the head's
  // clock, the head's (when not measured) moved by the inference's measure.
  const bool moved = Deployment(nodes) && !nodes.offset_ms.empty();
  const auto shift_of = [&](const std::string& machine) -> double {
    if (!moved) return 0;
    for (const std::string& m : {machine, nodes.head})
      if (auto it = nodes.offset_ms.find(m); it != nodes.offset_ms.end()) return -it->second * 1000.0;
    return -TargetClockOffsetUs(events_doc);
  };
  if (moved) {
    set.clock = "npuprof";
    const double head_shift = shift_of(nodes.head);
    for (auto& p : set.phases) {
      p.start_us += head_shift;
      if (p.end_us) *p.end_us += head_shift;
    }
  }
  for (auto& [key, d] : best) {
    const auto window = window_of(key.first);
    std::vector<sm::SeriesSample> samples;
    for (const auto& p : d.samples) samples.push_back({p.t_us, p.mb, p.row});
    const sm::ActivationPeak peak = sm::ActivationPeakFromSeries(
        std::move(samples), window ? std::optional<sm::InferenceWindow>(window->window) : std::nullopt,
        window ? sm::PeakOptionsFor(*window) : sm::ActivationPeakOptions{});
    const double shift = shift_of(key.first);
    if (peak.ok && peak.peak)
      set.peaks.push_back({key.second, key.first, peak.peak->t_us + shift, peak.peak_mb, peak.base_mb, peak.value_mb});
    for (auto& p : d.samples) p.t_us += shift;
    set.series.push_back(std::move(d));
  }
  // Node order: the head's devices first, then each node's.
  if (Deployment(nodes)) {
    const auto rank = [&](const std::string& m) {
      return std::find(nodes.machines.begin(), nodes.machines.end(), m) - nodes.machines.begin();
    };
    std::stable_sort(set.series.begin(), set.series.end(),
                     [&](const auto& a, const auto& b) { return rank(a.machine) < rank(b.machine); });
  }
  return set;
}

}  // namespace npuprof::views
