#include "tests/views/view_fixtures.h"

#include <fstream>
#include <map>
#include <sstream>

#include "parsers/msprof_csv_parser.h"

namespace npuprof::testing {

using nlohmann::json;

std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string ReadTestData(const std::string& rel) { return ReadFileBytes(std::string(NPUPROF_TEST_DATA_DIR) + "/" + rel); }

json TestJson(const std::string& rel) {
  json j = json::parse(ReadTestData(rel), nullptr, false);
  return j.is_discarded() ? json() : j;
}

namespace {

// Per task id: kind, payload, and the times it was scheduled and answered (ms).
struct TaskTimes {
  std::string kind;
  json payload;
  double scheduled_ms = -1;
  double answered_ms = -1;
};

std::map<std::string, TaskTimes> Tasks(const json& events_doc) {
  std::map<std::string, TaskTimes> out;
  for (const auto& e : events_doc.value("events", json::array())) {
    const std::string type = e.value("type", "");
    const json p = e.value("payload", json::object());
    if (!p.is_object()) continue;
    const std::string id = p.value("task_id", "");
    if (id.empty()) continue;
    const double t = e.value("time_ms", 0.0);
    if (type == "TaskScheduled") {
      out[id].kind = p.value("kind", "");
      out[id].payload = p.value("payload", json::object());
      out[id].scheduled_ms = t;
    } else if (type == "TaskSucceeded") {
      out[id].answered_ms = t;
    }
  }
  return out;
}

}  // namespace

std::optional<sm::InferenceWindow> InferenceWindowFromEvents(const json& events_doc) {
  for (const auto& [id, t] : Tasks(events_doc))
    if (t.kind == "memory.infer" && t.scheduled_ms >= 0 && t.answered_ms >= 0)
      return sm::InferenceWindow{t.scheduled_ms * 1000.0, t.answered_ms * 1000.0};
  return std::nullopt;
}

std::vector<views::PhaseMarker> PhasesFromEvents(const json& events_doc) {
  std::vector<views::PhaseMarker> out;
  for (const auto& [id, t] : Tasks(events_doc)) {
    const double s = t.scheduled_ms * 1000.0, a = t.answered_ms * 1000.0;
    if (t.kind == "memory.npu_smi" && t.payload.value("phase", "") == "baseline" && t.answered_ms >= 0)
      out.push_back({"baseline", a, std::nullopt});
    else if (t.kind == "service.launch" && t.scheduled_ms >= 0)
      out.push_back({"launch", s, std::nullopt});
    else if (t.kind == "service.wait_ready" && t.answered_ms >= 0)
      out.push_back({"ready", a, std::nullopt});
    else if (t.kind == "memory.infer" && t.scheduled_ms >= 0 && t.answered_ms >= 0)
      out.push_back({"inference", s, a});
    else if (t.kind == "service.stop" && t.scheduled_ms >= 0)
      out.push_back({"stop", s, t.answered_ms >= 0 ? std::optional<double>(a) : std::nullopt});
  }
  return out;
}

views::HbmSeriesSet SeriesSetFromRun(const json& events_doc, const std::string& npu_mem_csv, const std::string& file,
                                     const std::string& blob) {
  views::HbmSeriesSet set;
  set.phases = PhasesFromEvents(events_doc);
  const auto window = InferenceWindowFromEvents(events_doc);
  auto table = ParseNpuMemCsv(npu_mem_csv);
  if (!table.ok()) return set;
  for (const auto& s : table->series) {
    if (s.event != "Device" || !s.device_id) continue;
    views::DeviceHbmSeries d{*s.device_id, s.event, file, blob, {}};
    std::vector<sm::SeriesSample> samples;
    for (const auto& p : s.samples) {
      d.samples.push_back({p.timestamp_us, p.hbm_mb, p.data_row});
      samples.push_back({p.timestamp_us, p.hbm_mb, p.data_row});
    }
    const sm::ActivationPeak peak = sm::ActivationPeakFromSeries(samples, window);
    if (peak.ok && peak.peak)
      set.peaks.push_back({d.device_id, peak.peak->t_us, peak.peak_mb, peak.base_mb, peak.value_mb});
    set.series.push_back(std::move(d));
  }
  return set;
}

}  // namespace npuprof::testing
