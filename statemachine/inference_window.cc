#include "statemachine/inference_window.h"

#include <cmath>

namespace npuprof::sm {

namespace {

std::optional<double> Number(const json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::optional<InferenceWindow> Window(std::optional<double> start, std::optional<double> end, double to_us) {
  if (!start || !end || *end < *start || *start <= 0) return std::nullopt;
  return InferenceWindow{*start * to_us, *end * to_us};
}

}  // namespace

std::optional<ChosenWindow> ChooseInferenceWindow(const json& rec) {
  if (!rec.is_object()) return std::nullopt;
  const json& target = rec.contains("target_clock") ? rec["target_clock"] : json();
  if (auto w = Window(Number(target, "before_ns"), Number(target, "after_ns"), 1e-3))
    return ChosenWindow{*w, "target", kTargetMarginUs};
  const json& server = rec.contains("server_window_ms") ? rec["server_window_ms"] : json();
  if (auto w = Window(Number(server, "start_ms"), Number(server, "end_ms"), 1e3))
    return ChosenWindow{*w, "server", kServerMarginUs};
  return std::nullopt;
}

json ChosenWindowToJson(const ChosenWindow& w) {
  return {{"start_us", w.window.start_us}, {"end_us", w.window.end_us}, {"clock", w.clock},
          {"margin_us", w.margin_us}};
}

std::optional<ChosenWindow> ChosenWindowFromJson(const json& j) {
  const auto start = Number(j, "start_us"), end = Number(j, "end_us"), margin = Number(j, "margin_us");
  if (!start || !end || !margin || *margin < 0 || *end < *start || !j.contains("clock") || !j["clock"].is_string())
    return std::nullopt;
  const std::string clock = j["clock"].get<std::string>();
  if (clock != "target" && clock != "server") return std::nullopt;
  return ChosenWindow{{*start, *end}, clock, *margin};
}

ActivationPeakOptions PeakOptionsFor(const ChosenWindow& w) {
  ActivationPeakOptions o;
  o.margin_us = w.margin_us;
  return o;
}

std::map<int, std::string> DeviceSeriesFiles(const json& rows) {
  std::map<int, std::string> out;
  std::map<int, double> best;
  if (!rows.is_array()) return out;
  for (const auto& r : rows) {
    if (!r.is_object() || r.value("event", "") != "Device") continue;
    if (!r.contains("device_id") || !r["device_id"].is_number_integer()) continue;
    if (!r.contains("file") || !r["file"].is_string()) continue;
    const int dev = r["device_id"].get<int>();
    const double n = Number(r, "samples").value_or(0);
    if (!best.count(dev) || n > best[dev]) {
      best[dev] = n;
      out[dev] = r["file"].get<std::string>();
    }
  }
  return out;
}

}  // namespace npuprof::sm
