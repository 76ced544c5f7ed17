// Validation of a memory-profile spec (all three modes). Pure. Errors name
// the field and the fix; nothing has run when validation fails.
//
// Memory-specific fields and defaults (docs/BEHAVIOUR.md#mem-inputs):
//   mode standalone | attach | install_wrapper (default: attach when
//   attach_run is given, else standalone); gpu_memory_utilization 0.85;
//   max_model_len 2048; port: a free one on the target (null, as serve);
//   served_model_name: "npuprof-mem-<run_id>" (MemoryServedName), so two
//   profiles on one host never answer for each other; devices
//   0..tp*dp-1; max_tokens 128;
//   prompt (text); image_url (http(s):// or data: URL, selects
//   /v1/chat/completions); msprof_mem_freq 50 (1..100); export_timeout_s
//   1800; flush_s 5; enable_expert_parallel, enforce_eager (bool);
//   speculative_config / compilation_config / additional_config (JSON object
//   text); quantization (name); baseline_run (run id; the broker injects
//   baseline_run_record) or baseline_hbm {"<dev>": {used_mb,total_mb}} with
//   baseline_npu_smi_text (a saved npu-smi file, parsed by the client) and
//   baseline_origin (its path, for display).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "run_specs.pb.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

Status ValidateMemorySpec(json& spec);

// The vLLM arguments the memory workflow adds (before the user's extra args),
// from a standalone run's validated spec as its message (typed_spec.h).
std::vector<std::string> MemoryServeArgs(const run_specs::MemoryProfileSpec& spec);

// The wrap script path of a run: "<runtime_base>/<run_id>/msprof_wrap.sh"
// (may start with "~/": memory.preflight resolves it and answers the path).
std::string MemoryWrapScriptPath(const json& machine_record, const std::string& run_id);

// The served name of a standalone profile's service: the spec's, else
// "npuprof-mem-<run_id>".
std::string MemoryServedName(const run_specs::MemoryProfileSpec& spec, const std::string& run_id);

}  // namespace npuprof::sm
