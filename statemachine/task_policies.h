// Every task's retry policy in one table: how often a task is tried, the
// back-off between tries, and its lease (how long a worker may hold it
// without a result or a progress report before it is thought lost and the
// task re-dispatched; each progress report renews it).
// A policy is looked up by who schedules the task (a run kind, or one of the
// shared mechanisms: "device-lease", "device-quarantine") and the task kind;
// the policy a decision uses is recorded in its TaskScheduled event, so a
// change here applies to tasks scheduled after it, never to stored ones.
// Pure: no I/O; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "statemachine/run_state.h"

namespace npuprof::sm {

struct NamedTaskPolicy {
  std::string_view scheduler;  // run kind, or "device-lease" / "device-quarantine"
  std::string_view task_kind;
  TaskPolicy policy;
  std::string_view what;  // what the task does, for a reader sizing the lease
};

// The table, in scheduler order.
std::span<const NamedTaskPolicy> TaskPolicies();

// The policy `scheduler` uses for `task_kind`. A pair missing from the table
// is a mistake in the code that schedules it; it gets the default TaskPolicy
// (three tries, 1 s back-off, 120 s lease). tests/statemachine/
// task_policies_test.cc checks the pairs of the recorded runs in tests/data.
TaskPolicy PolicyFor(std::string_view scheduler, std::string_view task_kind);
bool HasPolicy(std::string_view scheduler, std::string_view task_kind);

// serve's watch polls every `poll_s` seconds: its lease covers three polls
// and at least 30 s.
TaskPolicy ServeWatchPolicy(int64_t poll_s);

// A node's one-off liveness check (service.watch with `once`): one poll.
TaskPolicy NodeCheckPolicy();

}  // namespace npuprof::sm
