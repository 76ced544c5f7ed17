// Rank positions of a torch-profile manifest: see torch_rank_positions.h.
#include "views/torch_rank_positions.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common/json_field.h"

namespace npuprof::views {

namespace {

using nlohmann::json;

// machine -> node index from the manifest's "nodes", else its remote_profile_roots.
std::map<std::string, int> NodeIndexOf(const json& m) {
  std::map<std::string, int> out;
  for (const auto& n : ArrField(m, "nodes")) {
    const std::string machine = StrField(n, "machine");
    const auto idx = NumField(n, "node");
    if (!machine.empty() && idx && *idx >= 0 && !out.count(machine)) out[machine] = static_cast<int>(*idx);
  }
  if (!out.empty()) return out;
  int i = 0;
  for (const auto& r : ArrField(m, "remote_profile_roots")) {
    const std::string machine = StrField(r, "machine");
    if (!machine.empty() && !out.count(machine)) out[machine] = i;
    ++i;
  }
  return out;
}

}  // namespace

std::vector<RankAt> RankPositions(const json& manifest) {
  std::map<std::string, int> node_of = NodeIndexOf(manifest);
  int next = 0;
  for (const auto& [machine, idx] : node_of) next = std::max(next, idx + 1);
  std::map<int, int> count;  // node -> ranks placed so far
  std::vector<RankAt> out;
  for (const auto& d : ArrField(manifest, "remote_profile_dirs")) {
    RankAt r;
    r.machine = StrField(d, "machine");
    r.dir = &d;
    if (r.machine.empty()) {
      r.key.node = 0;  // a one-node run's directory: its machine is the run's
      r.machine = StrField(manifest, "machine");
    } else {
      auto it = node_of.find(r.machine);
      if (it == node_of.end()) it = node_of.emplace(r.machine, next++).first;
      r.key.node = it->second;
    }
    r.key.rank_in_node = count[r.key.node]++;
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const RankAt& a, const RankAt& b) { return a.key < b.key; });
  return out;
}

std::vector<RankKey> UnionOfPositions(const std::vector<std::vector<RankAt>>& runs) {
  std::vector<RankKey> keys;
  for (const auto& run : runs)
    for (const auto& r : run) keys.push_back(r.key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

const RankAt* FindPosition(const std::vector<RankAt>& run, const RankKey& key) {
  for (const auto& r : run)
    if (r.key == key) return &r;
  return nullptr;
}

std::string PositionText(const RankKey& key) { return fmt::format("node {} rank {}", key.node, key.rank_in_node); }

json ShapeJson(const std::vector<RankAt>& run) {
  std::map<int, std::pair<int, std::string>> per;  // node -> ranks, machine
  for (const auto& r : run) {
    auto& p = per[r.key.node];
    ++p.first;
    if (p.second.empty()) p.second = r.machine;
  }
  json counts = json::array(), machines = json::array();
  for (const auto& [node, p] : per) {
    counts.push_back(p.first);
    machines.push_back(p.second.empty() ? json(nullptr) : json(p.second));
  }
  return {{"nodes", per.size()}, {"ranks_per_node", std::move(counts)}, {"machines", std::move(machines)}};
}

std::string ShapeText(const std::vector<RankAt>& run) {
  if (run.empty()) return "no ranks";
  const json s = ShapeJson(run);
  std::vector<std::string> counts;
  for (const auto& c : s["ranks_per_node"]) counts.push_back(c.dump());
  return fmt::format("{} node(s): {} rank(s)", s["nodes"].get<size_t>(), fmt::join(counts, "+"));
}

}  // namespace npuprof::views
