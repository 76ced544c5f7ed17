// Shared plumbing of the memory-profile handlers: payload, target, session.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "workers/remote.h"
#include "workers/task_outcome.h"

namespace npuprof::workers::mem {

struct Ctx {
  json payload;
  json machine;
  ssh::SshTarget target;
  std::shared_ptr<ssh::SshSession> session;
};

// Parses the payload and opens (lazily) the pooled session. On error the
// outcome to return is in *failure.
inline std::optional<Ctx> Open(const proto::Task& task, TaskContext& tc, TaskOutcome* failure) {
  Ctx c;
  c.payload = json::parse(task.payload_json(), nullptr, false);
  if (c.payload.is_discarded() || !c.payload.is_object()) {
    *failure = TaskOutcome::Failure("bad_payload", "task payload is not a JSON object", false);
    return std::nullopt;
  }
  c.machine = c.payload.value("machine", json::object());
  auto target = TargetFromMachine(c.machine);
  if (!target.ok()) {
    *failure = TaskOutcome::Failure("bad_payload", target.status().message(), false);
    return std::nullopt;
  }
  c.target = *target;
  c.session = tc.pool.Get(c.target);
  return c;
}

inline std::string MachineName(const Ctx& c) { return c.machine.value("name", c.target.host); }

}  // namespace npuprof::workers::mem
