// Worker fault injection for tests (off unless the environment asks):
//   NPUPROF_FAULT_WORKER_ABORT_IN_TASK=KIND[:DELAY_MS]
// makes the worker process SIGKILL itself DELAY_MS (default 500) after it
// started attempt 1 of a task of KIND, i.e. in the middle of that task. Only
// the first attempt: the re-dispatched one (on a restarted worker that
// inherited the same environment) runs normally.
#pragma once

#include <string>

#include "workers/task_outcome.h"

namespace npuprof::workers {

// Returns handler wrapped with the fault when the environment names kind,
// else handler unchanged.
TaskHandler WithWorkerAbortFault(const std::string& kind, TaskHandler handler);

}  // namespace npuprof::workers
