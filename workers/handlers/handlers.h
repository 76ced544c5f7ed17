// Task handlers: one function per task kind, registered on a WorkerRuntime
// with the payload message of its kind (workers/typed_handler.h).
#pragma once

#include "task_payloads.pb.h"
#include "workers/task_outcome.h"
#include "workers/worker_runtime.h"

namespace npuprof::workers {

// probe.npu_smi: `npu-smi info`, raw text kept as evidence, parsed, free/busy devices.
TaskOutcome ProbeNpuSmi(const tasks::ProbeNpuSmi& payload, const proto::Task& task, TaskContext& ctx);
// machine.check: connect, verify the host key, uname, which tools are present.
TaskOutcome MachineCheck(const tasks::MachineCheck& payload, const proto::Task& task, TaskContext& ctx);
// machine.clock: each machine's clock offset from the worker's (machine_clock_handler.cc).
TaskOutcome MachineClock(const tasks::MachineClock& payload, const proto::Task& task, TaskContext& ctx);

// Per run kind, in their own files (<kind>_register.cc).
void RegisterServiceHandlers(WorkerRuntime& runtime);        // service.*
void RegisterTorchProfileHandlers(WorkerRuntime& runtime);   // torch-profile tasks
void RegisterMemoryProfileHandlers(WorkerRuntime& runtime);  // memory-profile tasks

// Registers every handler this build has.
void RegisterDefaultHandlers(WorkerRuntime& runtime);

}  // namespace npuprof::workers
