#include "views/node_timeline.h"

#include <algorithm>
#include <cmath>

#include "common/text.h"
#include "views/html_page.h"

namespace npuprof::views {

namespace {

// The offset of `machine` in one ClockMeasured record ({offsets: [...]}), if measured.
const json* OffsetIn(const json& measure, const std::string& machine) {
  for (const auto& o : ArrField(measure, "offsets"))
    if (StrField(o, "machine") == machine && NumField(o, "offset_ms") && !Field(o, "error").is_string()) return &o;
  return nullptr;
}

}  // namespace

std::vector<NodeTimeline> NodeTimelinesFromManifest(const json& m) {
  std::vector<NodeTimeline> nodes;
  const std::string head = StrField(m, "machine");
  if (head.empty()) return nodes;
  // The deployment's machines: the head, then every other node.
  std::vector<std::string> machines = {head};
  for (const auto& n : ArrField(m, "nodes")) {
    const std::string mc = StrField(n, "machine");
    if (!mc.empty() && std::find(machines.begin(), machines.end(), mc) == machines.end()) machines.push_back(mc);
  }
  const json& clocks = Field(m, "clock_offsets");
  for (size_t i = 0; i < machines.size(); ++i) {
    NodeTimeline n;
    n.node = static_cast<int>(i);
    n.machine = machines[i];
    for (const char* when : {"start", "end"}) {
      if (const json* o = OffsetIn(Field(clocks, when), n.machine)) {
        n.offset_ms = *NumField(*o, "offset_ms");
        n.uncertainty_ms = NumField(*o, "uncertainty_ms");
        n.measured = when;
        break;
      }
    }
    nodes.push_back(std::move(n));
  }
  for (const auto& d : ArrField(m, "remote_profile_dirs")) {
    const std::string mc = Field(d, "machine").is_string() ? StrField(d, "machine") : head;
    const json& ks = Field(d, "kernel_summary");
    const auto start = NumField(ks, "first_start_us"), end = NumField(ks, "last_end_us");
    if (!start || !end || !std::isfinite(*start) || !std::isfinite(*end) || *end < *start) continue;
    for (auto& n : nodes) {
      if (n.machine != mc) continue;
      RankWindow r;
      r.path = StrField(d, "path");
      r.rank_dir = PathBaseName(r.path);
      if (Field(d, "device_id").is_number_integer()) r.device_id = Field(d, "device_id").get<int>();
      r.start_us = *start;
      r.end_us = *end;
      n.ranks.push_back(std::move(r));
    }
  }
  return nodes;
}

}  // namespace npuprof::views
