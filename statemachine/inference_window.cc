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
  const json& server = rec.contains("server_window_ms") ? rec["server_window_ms"] : json();
  const auto server_w = Window(Number(server, "start_ms"), Number(server, "end_ms"), 1e3);
  const auto ready_ms = Number(server, "ready_ms");
  if (auto w = Window(Number(target, "before_ns"), Number(target, "after_ns"), 1e-3)) {
    ChosenWindow c{*w, "target", kTargetMarginUs, std::nullopt};
    if (server_w && ready_ms)
      c.ready_us = *ready_ms * 1e3 + ((w->start_us + w->end_us) - (server_w->start_us + server_w->end_us)) / 2.0;
    return c;
  }
  if (server_w) {
    ChosenWindow c{*server_w, "server", kServerMarginUs, std::nullopt};
    if (ready_ms) c.ready_us = *ready_ms * 1e3;
    return c;
  }
  return std::nullopt;
}

json ChosenWindowToJson(const ChosenWindow& w) {
  json j = {{"start_us", w.window.start_us}, {"end_us", w.window.end_us}, {"clock", w.clock},
            {"margin_us", w.margin_us}};
  if (w.ready_us) j["ready_us"] = *w.ready_us;
  return j;
}

tasks::InferenceWindow ChosenWindowToMessage(const ChosenWindow& w) {
  tasks::InferenceWindow m;
  m.set_start_us(w.window.start_us);
  m.set_end_us(w.window.end_us);
  m.set_clock(w.clock);
  m.set_margin_us(w.margin_us);
  if (w.ready_us) m.set_ready_us(*w.ready_us);
  return m;
}

std::optional<ChosenWindow> ChosenWindowFromJson(const json& j) {
  const auto start = Number(j, "start_us"), end = Number(j, "end_us"), margin = Number(j, "margin_us");
  if (!start || !end || !margin || !j.contains("clock") || !j["clock"].is_string()) return std::nullopt;
  return UsableWindow(ChosenWindow{{*start, *end}, j["clock"].get<std::string>(), *margin, Number(j, "ready_us")});
}

std::optional<ChosenWindow> UsableWindow(ChosenWindow w) {
  if (w.margin_us < 0 || w.window.end_us < w.window.start_us) return std::nullopt;
  if (w.clock != "target" && w.clock != "server") return std::nullopt;
  return w;
}

std::optional<ChosenWindow> WindowOnNodeClock(const ChosenWindow& w, std::optional<NodeClockOffset> head,
                                              std::optional<NodeClockOffset> node) {
  const bool from_head = w.clock == "target";
  if (!node || (from_head && !head)) return std::nullopt;
  const double shift_ms = node->offset_ms - (from_head ? head->offset_ms : 0.0);
  const double spread_ms = std::abs(node->uncertainty_ms) + (from_head ? std::abs(head->uncertainty_ms) : 0.0);
  if (!std::isfinite(shift_ms) || !std::isfinite(spread_ms)) return std::nullopt;
  ChosenWindow out = w;
  out.window.start_us += shift_ms * 1e3;
  out.window.end_us += shift_ms * 1e3;
  out.margin_us += spread_ms * 1e3;
  if (out.ready_us) *out.ready_us += shift_ms * 1e3;
  return out;
}

ActivationPeakOptions PeakOptionsFor(const ChosenWindow& w) {
  ActivationPeakOptions o;
  o.margin_us = w.margin_us;
  o.base_not_before_us = w.ready_us;
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
