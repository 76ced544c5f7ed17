// The polling loop both flush waits share (torch_profile.wait_flush,
// memory.wait_flush): one remote poll per round with PollBackoff (50 ms
// doubling to 1 s), progress every round (keeps the lease), until the poll
// names the signal that ended the flush, the deadline passes or the broker
// cancels the attempt. The payload gives timeout_s and deadline_ms (absolute,
// fixed by the machine when it scheduled the wait), so a re-dispatched
// attempt waits only for what is left: the wait ends at the earlier of
// now + timeout_s (clamped to a day) and deadline_ms.
//
// Result on a signal or at the deadline (a timeout is a success: the run goes
// on with what exists and the gates judge it): the last poll's detail plus
// {signal ("timeout" at the deadline), flush_timed_out, waited_ms, polls}.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "workers/remote.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

// One poll: the signal when the flush is over (nullopt: not yet); detail is
// set to what this poll saw.
using FlushPollFn = std::function<Result<std::optional<std::string>>(json& detail)>;

TaskOutcome WaitForFlush(TaskContext& ctx, const ssh::SshTarget& target, int64_t timeout_s, int64_t deadline_ms,
                         const std::string& what, const FlushPollFn& poll);

}  // namespace npuprof::workers
