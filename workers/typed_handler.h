// Typed task handlers: a handler names the payload message of its task kind
// (proto/task_payloads.proto) and is given the payload decoded into it, so
// it reads fields, never JSON keys. The task kind is the message's
// (task_kind) option: registration cannot pair a handler with another kind's
// payload.
//
// A payload that does not decode (not a JSON object, a (needed) key missing,
// a key of the wrong type or one the message does not declare) answers
// `bad_payload`, not retryable, before the handler runs: nothing reaches the
// machine. This decode is the worker's one judgement of a payload; the
// worker runtime judges the handler's result against its result message
// (worker_runtime.cc).
#pragma once

#include <functional>
#include <string>
#include <utility>

#include "statemachine/task_schema.h"
#include "workers/task_outcome.h"
#include "workers/worker_runtime.h"

namespace npuprof::workers {

template <class Payload>
using TypedTaskHandler = std::function<TaskOutcome(const Payload&, const proto::Task&, TaskContext&)>;

// The untyped handler that decodes the payload and calls handler.
template <class Payload>
TaskHandler Typed(TypedTaskHandler<Payload> handler) {
  return [handler = std::move(handler)](const proto::Task& task, TaskContext& ctx) {
    Payload payload;
    if (Status s = sm::DecodeTaskPayload(task.kind(), task.payload_json(), payload); !s.ok())
      return TaskOutcome::Failure("bad_payload", s.message(), false);
    return handler(payload, task, ctx);
  };
}

// Registers handler for the task kind its payload message names.
template <class Payload>
void RegisterTyped(WorkerRuntime& runtime, TaskOutcome (*handler)(const Payload&, const proto::Task&, TaskContext&)) {
  runtime.Register(sm::TaskKindOf(*Payload::descriptor()), Typed<Payload>(handler));
}

}  // namespace npuprof::workers
