// The memory-profile report of a deployment over several machines: each
// node's own report (BuildMemoryReport of that node's evidence) put together,
// every device keyed by (machine, device_id), with totals per node and for
// the deployment. Pure: no I/O, the same input always gives the same bytes.
//
// Input: the head's report first, then every other node's, each built from
// its node's evidence (its own npu-smi snapshots, vLLM log and msprof series;
// the weights read once, on the head, with EP = TP x DP over every node), as
// [{"node", "machine", "report"}].
//
// Output: the head's report (schema, mode, tp, dp, weights_breakdown, ...)
// with
//   "devices":  every node's devices in node order, each with "machine" and
//               "node" beside "device_id";
//   "nodes":    [{"node", "machine", "devices": [ids], "msprof": {...},
//                 "totals": Totals}];
//   "totals":   Totals of the whole deployment;
//   "msprof":   status "ok" only when every node's is, else the first other
//               status with the node it came from; available = any node's;
//   "evidence_chain", "notes": the head's, then each other node's entries
//               with "machine" (a note every node shares is said once;
//               another node's own is prefixed "node i (machine): ").
// Totals = {"devices", "hbm_used_mb", "hbm_total_mb", "components_mb":
// {key: sum}}: sums over the devices that measured the value (a component
// no device measured is null).
#pragma once

#include "statemachine/run_state.h"

namespace npuprof::sm {

// Totals of a list of report devices (the layout above).
json MemoryDeviceTotals(const json& devices);

// The deployment's report from its nodes' reports (the layout above).
json MergeNodeMemoryReports(const json& nodes);

}  // namespace npuprof::sm
