// A wait whose polls run on the target: one remote command runs a check in
// a loop (10 ms between polls, doubling to 50 ms) until the check reports
// its signal or the slice passes, then prints what the last poll saw. A
// handler waits slice by slice, observing its deadline and cancellation
// between slices, so a signal (a log line, a file, a process group gone) is
// seen within ~50 ms of appearing at the cost of one remote command per
// slice, where a worker-side poll would see it only at its next round.
//
// The check is the body of a sh function `check`: it runs in the loop's own
// shell (no process per poll beyond those it starts itself), gets the
// check's args as "$@", sets `obs` to what it saw and returns 0 for the
// signal, non-zero for "not yet". `prelude` is sh text defined before it
// (helper functions). Every value travels as a positional argument; the
// scripts are constants. The loop's own variables start with `_w`.
//
// Output (ParseRemoteWait): "npuprof-wait signal|timeout polls=N
// waited_ms=M" on the first line, then `obs`. The elapsed time comes from
// /proc/uptime (read with the shell's `read`, no process); where that cannot
// be read, from the sum of the loop's sleeps.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::workers {

struct RemoteCheck {
  std::string prelude;            // sh text before the check (function definitions)
  std::string body;               // the body of `check() { ... }`
  std::vector<std::string> args;  // the check's "$@"
};

struct RemoteWaitResult {
  bool signalled = false;   // the check returned 0 (else the slice passed)
  std::string observation;  // `obs` of the last poll
  int polls = 0;
  int64_t waited_ms = 0;    // on the target's clock
};

// `sh -c LOOP npuprof-wait SLICE_MS ARGS...` (pure).
std::vector<std::string> RemoteWaitArgv(const RemoteCheck& check, std::chrono::milliseconds slice);

// Reads the loop's output; Corruption when the summary line is missing.
Result<RemoteWaitResult> ParseRemoteWait(const std::string& out);

// Runs one slice on the session (its command timeout: the slice + 30 s). A
// non-zero exit of the loop (the check's shell failed) is a RemoteError
// naming its stderr.
Result<RemoteWaitResult> RunRemoteWait(ssh::SshSession& session, const RemoteCheck& check,
                                       std::chrono::milliseconds slice);

// Checks shared by several waits.
RemoteCheck FileExistsCheck(const std::string& path);  // signal: path exists

}  // namespace npuprof::workers
