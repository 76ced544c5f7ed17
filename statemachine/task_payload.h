// PayloadOf<M>(task): the payload a task was scheduled with, as the run
// state keeps it (TaskScheduled.payload), read as its message
// (proto/task_payloads.proto), for a decision that looks back at what it
// asked for (the force of a stop, the role of a request wave, the runtime
// dir of a launch). A field name is checked by the compiler and a value has
// its declared type; a key an older npuprof wrote that the message no longer
// declares is passed over.
//
// The payload was judged against M when it was scheduled, so it decodes; one
// that does not (a store from another schema), or M not the task kind's
// message, throws std::logic_error naming the task and the key: in a decision
// the broker then fails the task whose result the decision was reading
// (kind_failed), or cancels the run for any other input (broker/commit.cc);
// in a projection (torch-profile's analysis) the request fails, or the
// broker's guard names it (broker/projection_guard.h).
//
// The message is returned by value: bind it before looping over one of its
// repeated fields, since a range-for over a member of the temporary reads
// freed memory.
// Pure: no I/O.
#pragma once

#include <stdexcept>
#include <string>

#include "common/status.h"
#include "statemachine/run_state.h"
#include "statemachine/task_schema.h"

namespace npuprof::sm {

template <class M>
M PayloadOf(const TaskInfo& task) {
  M out;
  if (Status st = DecodeStoredTaskPayload(task.kind, task.payload, out); !st.ok())
    throw std::logic_error("task " + task.task_id + ": " + st.message());
  return out;
}

}  // namespace npuprof::sm
