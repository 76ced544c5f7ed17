// A run's event log as a Chrome Trace Event document (the JSON Object
// Format: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData":
// {...}}) that Perfetto UI and chrome://tracing open. Pure.
//
// Input: the JSON `npuprof events RUN --json` prints ({"run_id", "events":
// [{seq, type, time_ms, payload, cause, ...}]}, or the bare events array),
// and optionally the HBM series of the run's devices (views/hbm_series.h).
//
// What the trace holds (pids and tids are small integers, each named by
// process_name / thread_name metadata and ordered by *_sort_index):
//   pid 1 "run <id> (<kind>)":
//     tid 1 "state"   one X span per state the run was in (StateChanged),
//                     the last ending at RunFinished (or the last event);
//     tid 2 "events"  instants: submitted, devices requested / leased /
//                     released, ready (state), service ready, start_profile /
//                     stop_profile answered, inference answered, service
//                     stopped, cancel requested, signal <name>, recovered
//                     after a restart, result ignored, finished <status>;
//     tid 3 "timers"  instants: timer scheduled / fired / cancelled, retry
//                     scheduled.
//   pid 10+ "worker <id>": every task attempt that worker answered (or was
//     lost holding) as an X span from its dispatch decision (TaskScheduled /
//     TaskRedispatched) to its outcome, on the first free "slot N" thread
//     (concurrent attempts of one worker never overlap on a thread). Names
//     are the task kind plus its role, phase or action, "#N" for attempt
//     N > 1; args hold task_id, attempt, why it was dispatched (first /
//     retry / worker_lost / recovery), outcome, error_kind, error, when
//     the task's result records it, ssh_commands, and for an answered
//     attempt its link figures (statemachine/task_link.h): round_trips,
//     link_ms and every figure under link; "not recorded" as round_trips
//     for an event written before they were, link_error for figures that
//     do not decode.
//   pid 2 "attempts without a worker": attempts that ended without a worker
//     being known (abandoned, re-dispatched after a restart, still open).
//   pid 1000 "HBM (msprof npu_mem)": one counter track per device
//     ("device N HBM (<event>)", args {"MB": value}) from the given series;
//     a series whose machine is one of the given nodes' goes to that node's
//     process instead (thread 0 "HBM (msprof npu_mem)"; a memory-profile
//     over several machines: each node's devices under its node, already
//     on npuprof's clock, views/hbm_series_from_run.h).
//   pid 2000+i "node i <machine> (clock +X ms ± U)": one process per node of
//     a torch-profile run or a multi-node memory-profile run (views/node_timeline.h), one thread per rank
//     ("<rank_dir> (device N)") with one X span "kernels": the rank's first
//     kernel start to its last kernel end, moved from the node's clock onto
//     npuprof's (node time − offset_ms); args keep the node-clock times and
//     the offset. otherData.clock_offsets lists every node's {node, machine,
//     pid, offset_ms, uncertainty_ms, measured: start|end|none}, and
//     otherData.clock_rule says how they were applied.
// Timestamps are µs from the earliest event or sample (recorded with its
// ISO time in otherData.origin); on each track events are in time order; X
// spans carry dur >= 0; no B/E pairs are used.
//
// Errors: no events array, an empty one, or events without a numeric
// time_ms (the message names the event's index).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "views/hbm_series.h"
#include "views/node_timeline.h"

namespace npuprof::views {

Result<nlohmann::json> BuildChromeTrace(const nlohmann::json& events_doc,
                                        const std::vector<DeviceHbmSeries>& hbm = {},
                                        const std::vector<NodeTimeline>& nodes = {});

}  // namespace npuprof::views
