// Helpers every task handler uses to reach a machine: the machine record (as
// stored in the inventory) turned into an SshTarget, remote commands built
// from argv with the one quoting routine, and SSH failures turned into task
// outcomes with a clear kind and retry verdict.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "workers/ssh/ssh_pool.h"
#include "workers/ssh/ssh_session.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

Result<ssh::SshTarget> TargetFromMachine(const json& machine);

// Runs argv on the machine after sourcing its env script (if any).
Result<ssh::ExecResult> RunRemote(ssh::SshSession& session, const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout,
                                  const std::vector<std::pair<std::string, std::string>>& env = {});

// Maps an SSH-layer failure to an outcome: unreachable / timeout /
// connection_lost are retryable; auth and host key problems are not.
TaskOutcome OutcomeFromSsh(const Status& st, const ssh::SshTarget& target);

// Adds {"host_key_accepted": {...}} to result the first time this process
// sees an accept-new acceptance on the session (the broker records it).
void NoteHostKeyAcceptance(ssh::SshSession& session, const json& machine, json& result);

// Last n lines of text.
std::string TailLines(const std::string& text, int n);

}  // namespace npuprof::workers
