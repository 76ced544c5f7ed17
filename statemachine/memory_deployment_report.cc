#include "statemachine/memory_deployment_report.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "common/json_field.h"
#include "statemachine/memory_report.h"

namespace npuprof::sm {

namespace {

double R3(double v) { return std::round(v * 1000.0) / 1000.0; }

// Adds v (a number) to the running sum; null and absent values are passed over.
void AddTo(std::optional<double>& sum, const json& v) {
  if (v.is_number()) sum = sum.value_or(0.0) + v.get<double>();
}

json Opt(const std::optional<double>& v) { return v ? json(R3(*v)) : json(nullptr); }

}  // namespace

json MemoryDeviceTotals(const json& devices) {
  std::optional<double> used, total;
  std::map<std::string, std::optional<double>> comps;
  for (const char* k : kMemComponentKeys) comps[k] = std::nullopt;
  size_t n = 0;
  if (devices.is_array()) {
    for (const auto& d : devices) {
      if (!d.is_object()) continue;
      ++n;
      AddTo(used, d.value("hbm_used_mb", json(nullptr)));
      AddTo(total, d.value("hbm_total_mb", json(nullptr)));
      for (const auto& c : Field(d, "components"))
        if (c.is_object()) AddTo(comps[c.value("key", "")], c.value("value_mb", json(nullptr)));
    }
  }
  json cj = json::object();
  for (const char* k : kMemComponentKeys) cj[k] = Opt(comps[k]);
  return {{"devices", n}, {"hbm_used_mb", Opt(used)}, {"hbm_total_mb", Opt(total)}, {"components_mb", cj}};
}

json MergeNodeMemoryReports(const json& nodes) {
  if (!nodes.is_array() || nodes.empty() || !Field(nodes[0], "report").is_object()) return json::object();
  json out = nodes[0]["report"];
  json devices = json::array(), per_node = json::array(), chain = json::array(), notes = json::array();
  std::string status = "ok", status_node;
  bool available = false;
  std::set<std::string> raw_notes;
  for (const auto& n : nodes) {
    const json& r = Field(n, "report");
    if (!r.is_object()) continue;
    const int64_t node = n.value("node", int64_t{0});
    const std::string machine = n.value("machine", "");
    json ids = json::array(), devs = json::array();
    for (json d : Field(r, "devices")) {
      d["machine"] = machine;
      d["node"] = node;
      ids.push_back(d.value("device_id", json(nullptr)));
      devs.push_back(d);
      devices.push_back(std::move(d));
    }
    const json& m = Field(r, "msprof");
    const std::string st = m.is_object() ? m.value("status", "unknown") : "unknown";
    available = available || (m.is_object() && m.value("available", false));
    if (st != "ok" && status == "ok") {
      status = st;
      status_node = fmt::format("node {} ({})", node, machine);
    }
    per_node.push_back({{"node", node},
                        {"machine", machine},
                        {"devices", ids},
                        {"msprof", m.is_object() ? m : json(nullptr)},
                        {"totals", MemoryDeviceTotals(devs)}});
    for (json e : Field(r, "evidence_chain")) {
      e["machine"] = machine;
      chain.push_back(std::move(e));
    }
    // A note every node shares is said once; another node's own is prefixed.
    for (const auto& t : Field(r, "notes")) {
      if (!t.is_string() || !raw_notes.insert(t.get<std::string>()).second) continue;
      notes.push_back(node == 0 ? t.get<std::string>()
                                : fmt::format("node {} ({}): {}", node, machine, t.get<std::string>()));
    }
  }
  out["devices"] = devices;
  out["nodes"] = per_node;
  out["totals"] = MemoryDeviceTotals(devices);
  out["msprof"] = {{"status", status}, {"available", available}};
  if (!status_node.empty()) out["msprof"]["status_node"] = status_node;
  out["evidence_chain"] = chain;
  out["notes"] = notes;
  return out;
}

}  // namespace npuprof::sm
