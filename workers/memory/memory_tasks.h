// The memory-profile task handlers. Each is given its kind's payload message
// (proto/task_payloads.proto: MemoryPreflight, MemoryNpuSmi, ...); below,
// what each does and answers. Every remote command is built from argv by
// workers/ssh/shell_quote.h (via RunRemote).
//
// memory.preflight
//   `command -v msprof`, `msprof --help` (there is no --version), a Python
//   that imports torch_npu; writes the msprof wrap script over SFTP.
//   -> {msprof_path, python, wrap_script, msprof_mem_freq}; blob msprof_help.txt.
//   Failure kinds: msprof_missing, msprof_broken, torch_npu_missing. Idempotent.
// memory.npu_smi     -> {hbm, device_count}; blob <phase>_npu_smi.txt.
//   Failure kinds: npu_smi_missing, npu_smi_failed, unparseable. Read-only.
// memory.logs
//   -> {summary: VllmLogToJson, bytes, env_error_hint}; blob vllm_serve.log
//   (stdout then stderr; line numbers in the summary refer to it). Read-only.
// memory.infer
//   text -> POST /v1/completions; image_url -> POST /v1/chat/completions.
//   -> {endpoint, http_status, ok, latency_ms, usage}; blob inference_response.json.
// memory.export
//   `msprof --export=on --output=<msprof_dir>` detached on the target with
//   markers <msprof_dir>.export.{pid,rc,log}; a re-dispatched attempt finds
//   the markers and waits instead of starting again.
//   -> {status: ok|failed|no_msprof_data, exit_code, adopted, waited_s}; blob msprof_export.log.
// memory.wait_flush
//   after the stop: polls (one command per poll, workers/handlers/flush_signals.h)
//   until no process of the service's group is left and every PROF_* dir
//   has its end_info markers (or msprof logged its completion), or until
//   deadline_ms. -> {signal: end_info|completion_line|no_msprof_data|
//   msprof_exited_incomplete|timeout, flush_timed_out, waited_ms, polls,
//   prof_dirs, complete_lines, msprof_alive, msprof_dir}. With `collect`
//   (one-node runs) the same command also looks for msprof's own export and
//   streams the CSVs (workers/handlers/flush_then_collect.h): then
//   {exported, collected} too, and the export and collection need no task.
//   Read-only.
// memory.collect_csvs
//   ONE command streams every *.csv > 100 bytes (and lists device_<N> dirs);
//   PROF -> device map; npu_module_mem / npu_mem parsed (newest export only).
//   -> {csvs, __prof_device_map__, prof_dirs, module_mem: [...], npu_mem: [...]};
//   blobs msprof_csvs/<local name>. Read-only.
// memory.weights
//   SFTP: config.json, then per *.safetensors 8 bytes + the header only.
//   -> {weights: {per_device_bytes, total_bytes, categories, tp, dp, ep, ...},
//       theory, config}; blobs config.json, weight_manifest.json,
//   safetensors_headers/<file>.json. Read-only.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "task_payloads.pb.h"
#include "workers/memory/memory_common.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

TaskOutcome MemPreflight(const tasks::MemoryPreflight& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome MemNpuSmi(const tasks::MemoryNpuSmi& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome MemLogs(const tasks::MemoryLogs& p, const proto::Task& task, TaskContext& ctx);
// memory.logs' work on a given connection (c: memory_common.h), for a caller
// that holds a session of its own (the readiness wait's then_logs).
TaskOutcome MemLogsOn(const tasks::MemoryLogs& p, mem::Ctx& c);
TaskOutcome MemInfer(const tasks::MemoryInfer& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome MemExport(const tasks::MemoryExport& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome MemCollectCsvs(const tasks::MemoryCollectCsvs& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome MemWeights(const tasks::MemoryWeights& p, const proto::Task& task, TaskContext& ctx);
TaskOutcome MemWaitFlush(const tasks::MemoryWaitFlush& p, const proto::Task& task, TaskContext& ctx);
// memory.operator_memory (memory_operator_memory_handler.cc): analyse() then
// the operator-memory digest of every rank under profile_root.
// -> {profile_root, ranks: [OperatorMemoryRankJson], note}; blob operator_memory_digest.json.
TaskOutcome MemOperatorMemory(const tasks::MemoryOperatorMemory& p, const proto::Task& task, TaskContext& ctx);

// The msprof wrap script (receives the _serve.sh path and the runtime dir;
// execs msprof around `bash _serve.sh` with output <runtime>/msprof_data).
std::string MsprofWrapScript(int mem_freq_hz);

}  // namespace npuprof::workers
