// Shared plumbing of the memory-profile handlers: the payload's machine, its
// target and the pooled session.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "workers/remote.h"
#include "workers/task_outcome.h"

namespace npuprof::workers::mem {

struct Ctx {
  tasks::Machine machine;
  ssh::SshTarget target;
  std::shared_ptr<ssh::SshSession> session;
};

// Opens (lazily) the pooled session to the payload's machine. On error the
// outcome to return is in *failure.
inline std::optional<Ctx> Open(const tasks::Machine& machine, TaskContext& tc, TaskOutcome* failure) {
  Ctx c;
  c.machine = machine;
  auto target = TargetFromMachine(c.machine);
  if (!target.ok()) {
    *failure = TaskOutcome::Failure("bad_payload", target.status().message(), false);
    return std::nullopt;
  }
  c.target = *target;
  c.session = tc.pool.Get(c.target);
  return c;
}

inline std::string MachineName(const Ctx& c) { return workers::MachineName(c.machine); }

}  // namespace npuprof::workers::mem
