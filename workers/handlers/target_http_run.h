// Runs HTTP on the target (workers/profiling/target_http.h) for a task
// handler: the program as one remote command on the session's command
// shell, its output read strictly. The program starts as the interpreter
// this worker resolved for the machine (target_interpreter.h: the first
// exchange on a machine runs `python3` and reports sys.executable; later
// ones start that path; a path that no longer starts the program is
// forgotten and the exchange runs again with `python3`, nothing having
// been sent). The handler keeps the direct-tcpip path
// (SshSession::Http / HttpMany) for when this answers nullopt: the plan is
// too large for a command line, or the program never started there (no
// python3), so nothing was sent.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "workers/profiling/target_http.h"
#include "workers/profiling/target_interpreter.h"
#include "workers/ssh/http_over_ssh.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::workers {

// The digest, nullopt (take the direct path), or an error: the SSH layer's
// (its kind prefixed, as OutcomeFromSsh reads it) or Corruption (the
// program started and its digest is not as described: its requests may
// have been sent, so the caller must not send them again).
Result<std::optional<profiling::TargetHttpDigest>> RunTargetHttp(ssh::SshSession& session,
                                                                  const profiling::TargetHttpPlan& plan);

// What runs one remote argv within a deadline: RunRemote on a session in
// RunTargetHttp; a fake in tests.
using RemoteArgvRunner =
    std::function<Result<ssh::ExecResult>(const std::vector<std::string>& argv, std::chrono::milliseconds deadline)>;

// RunTargetHttp's steps with the runner and the cache given: plan's
// interpreter and report_interpreter are set here from cache[key] (a path
// when known, else "python3" asked to report itself). When a cached path
// ran and the program never started (no first line: the shell's 127 or
// 126, or anything else before the program ran), that path is forgotten
// and the plan runs once more with "python3". A reported path is kept.
Result<std::optional<profiling::TargetHttpDigest>> RunTargetHttpWith(const RemoteArgvRunner& run,
                                                                     profiling::TargetInterpreters& cache,
                                                                     const std::string& key,
                                                                     profiling::TargetHttpPlan plan);

// One answer in the direct path's terms: the response (status, reason,
// body, latency_ms), or the program's error for that request as an SSH
// error of kind timeout (the socket timed out) or channel_failed (anything
// else: refused, reset), so the handler's retry verdicts stay the same.
Result<ssh::HttpResponse> AsHttpResponse(const profiling::TargetHttpAnswer& answer, int port);

}  // namespace npuprof::workers
