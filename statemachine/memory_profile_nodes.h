// memory-profile over several machines: which steps run on every node, where
// each node's evidence is kept, and when a step is done on a node. Pure (no
// I/O); the planner (memory_profile_machine.cc) and the report input read it.
//
// Contract (docs/MULTINODE.md "memory-profile across nodes"):
// * A per-node step (preflight, baseline, after_ready, vllm_log, after_infer,
//   flushed, export, msprof) runs once on every node, on that node's machine,
//   all nodes at once; the step is done when every node's is. readiness, the
//   inference and the safetensors read run on the head only; the service's
//   launch and stop are the shared node lifecycle (deployment_service.h).
// * The head's (node 0's) evidence is kept as in a one-node run
//   (data.<field>, data.step_failures.<step>); node i's (i >= 1) under
//   data.node_evidence["<i>"][field] (MemoryNodeEvidenceRecorded) and its
//   failures under data.step_failures["<step>@node<i>"].
// * After the launch, a node with no service (its launch started nothing)
//   has nothing to read: its service steps count as done.
// * A one-node run has node 0 only: every function reads as before.
#pragma once

#include <string>
#include <string_view>

#include "statemachine/run_state.h"

namespace npuprof::sm {

inline constexpr const char* kMemNodeEvidence = "MemoryNodeEvidenceRecorded";

// Whether the step runs on every node of a deployment.
bool MemPerNodeStep(std::string_view step);
// Whether the step reads the node's service (it runs after the launch).
bool MemServiceStep(std::string_view step);

// Where node i's failure of step is kept: "<step>" for the head,
// "<step>@node<i>" for another node.
std::string MemNodeStepKey(std::string_view step, int node);

// Node i's record of field: data.<field> for the head, else
// data.node_evidence["<i>"][field]; null when none.
const json& MemNodeField(const RunState& s, int node, std::string_view field);

// Node i (>= 1) has recorded step, or failed it for good.
bool MemNodeStepDone(const RunState& s, int node, std::string_view step);

// Folds a MemoryNodeEvidenceRecorded payload into s.data.
void ApplyMemNodeEvidence(RunState& s, const json& payload);

}  // namespace npuprof::sm
