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
#include "task_payloads.pb.h"
#include "workers/ssh/ssh_pool.h"
#include "workers/ssh/ssh_session.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

// The machine record of a task payload (port 0 = 22); a record without host
// or user is Status::Invalid.
Result<ssh::SshTarget> TargetFromMachine(const tasks::Machine& machine);
// The name the machine was added under, or its host when the record has none.
std::string MachineName(const tasks::Machine& machine);

// Runs argv on the machine after sourcing its env script (if any).
Result<ssh::ExecResult> RunRemote(ssh::SshSession& session, const std::vector<std::string>& argv,
                                  std::chrono::milliseconds timeout,
                                  const std::vector<std::pair<std::string, std::string>>& env = {});

// Maps an SSH-layer failure to an outcome: unreachable / timeout /
// connection_lost / channel_failed are retryable; the permanent kinds
// (ssh::IsPermanent: auth, host key, subsystem refused, missing tool, invalid
// input) and remote file errors are not, and their message names the fix.
TaskOutcome OutcomeFromSsh(const Status& st, const ssh::SshTarget& target);

// Adds {"host_key_accepted": {...}} to result the first time this process
// sees an accept-new acceptance on the session (the broker records it).
void NoteHostKeyAcceptance(ssh::SshSession& session, const tasks::Machine& machine, json& result);

// Caps on reads of remote logs (docs/RELIABILITY.md, "Caps").
inline constexpr uint64_t kLogReadCap = uint64_t{32} << 20;  // a log read as evidence (ReadHeadTail)
inline constexpr size_t kShownTailMaxBytes = 8 << 10;        // what TailLines returns at most

// The file whole when it has at most `cap` bytes; else its first cap/2 and
// last cap/2 bytes with ssh::OmittedMarker between (start-up lines and the
// final error both survive). Errors are the session's (kRemoteError +
// kNotFound when there is no such file).
Result<std::string> ReadHeadTail(ssh::SshSession& session, const std::string& path, uint64_t cap);

// The last n lines of remote text, as text for people: at most
// kShownTailMaxBytes (the end kept, "…" in front when cut) and valid UTF-8
// (common/utf8.h). Not for evidence: blobs keep the bytes themselves.
std::string TailLines(const std::string& text, int n);

}  // namespace npuprof::workers
