#include "statemachine/memory_profile_nodes.h"

#include <array>

#include <fmt/format.h>

#include "common/json_field.h"
#include "statemachine/deployment_service.h"

namespace npuprof::sm {

namespace {

constexpr std::array<std::string_view, 8> kPerNode = {"preflight", "baseline", "service", "after_ready",
                                                      "vllm_log",  "after_infer", "flushed", "export"};
constexpr std::array<std::string_view, 6> kService = {"after_ready", "vllm_log", "after_infer",
                                                      "flushed",     "export",   "msprof"};

template <size_t N>
bool In(const std::array<std::string_view, N>& a, std::string_view s) {
  for (std::string_view x : a)
    if (x == s) return true;
  return false;
}

const json& Null() {
  static const json n;
  return n;
}

}  // namespace

bool MemPerNodeStep(std::string_view step) { return In(kPerNode, step) || step == "msprof"; }

bool MemServiceStep(std::string_view step) { return In(kService, step); }

std::string MemNodeStepKey(std::string_view step, int node) {
  return node == 0 ? std::string(step) : fmt::format("{}@node{}", step, node);
}

const json& MemNodeField(const RunState& s, int node, std::string_view field) {
  const std::string f(field);
  if (node == 0) return s.data.contains(f) ? s.data[f] : Null();
  const json& n = Field(Field(s.data, "node_evidence"), std::to_string(node).c_str());
  return n.is_object() && n.contains(f) ? n[f] : Null();
}

bool MemNodeStepDone(const RunState& s, int node, std::string_view step) {
  if (!MemNodeField(s, node, step).is_null()) return true;
  if (Field(s.data, "step_failures").contains(MemNodeStepKey(step, node))) return true;
  // After the launch, a node whose launch started nothing has nothing to read.
  return node > 0 && MemServiceStep(step) && !NodeServiceOf(s, node);
}

void ApplyMemNodeEvidence(RunState& s, const json& p) {
  const std::string node = std::to_string(p.value("node", int64_t{0}));
  s.data["node_evidence"][node][p.value("field", "unknown")] = p.value("value", json(nullptr));
}

}  // namespace npuprof::sm
