// memory-profile --operator-memory: what the run adds to a standalone
// profile (docs/BEHAVIOUR.md#mem-operator-memory). Pure.
//
// * The launch gets vLLM's --profiler-config with torch profiling into
//   <runtime_dir>/kOperatorMemoryDir and torch_profiler_with_memory (torch_npu
//   profile_memory=True), so torch_npu records every allocation and release
//   while the profiler runs; nothing is profiled until /start_profile.
// * The steps profile_start / profile_stop (torch_profile.control: POST
//   /start_profile, /stop_profile) wrap the one inference: only the
//   inference window is profiled.
// * The step operator_memory (memory.operator_memory) runs analyse() on every
//   rank's *_ascend_pt under that dir and digests each rank's
//   operator_memory.csv and memory_record.csv on the target
//   (statemachine/operator_memory_digest.h); the report projects it
//   (operator_memory_report.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "run_specs.pb.h"
#include "task_payloads.pb.h"

namespace npuprof::sm {

// The torch profiler's directory, relative to the service's runtime dir.
inline constexpr const char* kOperatorMemoryDir = "npuprof_operator_memory";

// The vLLM arguments operator memory adds ({} when the spec does not ask).
std::vector<std::string> OperatorMemoryServeArgs(const run_specs::MemoryProfileSpec& spec);

// POST /start_profile (step "profile_start") or /stop_profile ("profile_stop");
// the step travels as the payload's role.
tasks::TorchProfileControl OperatorMemoryControl(const std::string& step, std::optional<int64_t> port);

// The analyse + digest task of the profiler dir under runtime_dir.
tasks::MemoryOperatorMemory OperatorMemoryTask(const run_specs::MemoryProfileSpec& spec,
                                               const std::string& runtime_dir, const std::string& step);

}  // namespace npuprof::sm
