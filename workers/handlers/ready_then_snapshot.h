// What service.wait_ready does once it saw the service ready, when its
// payload asks (ServiceWaitReady.then_snapshot / then_logs; memory-profile,
// issue 38): the after-ready snapshot and the log read, by memory.npu_smi's
// and memory.logs' own handlers (read-only on the target: a re-delivered
// wait takes them again and reads the same kind of evidence), at once (the
// log read on a thread of its own, its connection the pool's) on the
// machine of the wait. Each succeeded part goes into the wait's
// result (after_ready, vllm_log) with its blobs; a part that failed is left
// out (logged), and the run schedules its task as before. then_ms: the
// milliseconds spent here. Never turns a ready answer into a failure.
#pragma once

#include "task_payloads.pb.h"
#include "workers/task_outcome.h"

namespace npuprof::workers::service {

// `ready`: the wait's successful outcome; returned with the parts added.
TaskOutcome TakeAfterReady(const tasks::ServiceWaitReady& p, const proto::Task& task, TaskContext& ctx,
                           TaskOutcome ready);

}  // namespace npuprof::workers::service
