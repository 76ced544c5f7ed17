// Runs HTTP on the target (workers/profiling/target_http.h) for a task
// handler: the program as one remote command on the session's command
// shell, its output read strictly. The handler keeps the direct-tcpip path
// (SshSession::Http / HttpMany) for when this answers nullopt: the plan is
// too large for a command line, or the program never started there (no
// python3), so nothing was sent.
#pragma once

#include <optional>

#include "common/status.h"
#include "workers/profiling/target_http.h"
#include "workers/ssh/http_over_ssh.h"
#include "workers/ssh/ssh_session.h"

namespace npuprof::workers {

// The digest, nullopt (take the direct path), or an error: the SSH layer's
// (its kind prefixed, as OutcomeFromSsh reads it) or Corruption (the
// program started and its digest is not as described: its requests may
// have been sent, so the caller must not send them again).
Result<std::optional<profiling::TargetHttpDigest>> RunTargetHttp(ssh::SshSession& session,
                                                                  const profiling::TargetHttpPlan& plan);

// One answer in the direct path's terms: the response (status, reason,
// body, latency_ms), or the program's error for that request as an SSH
// error of kind timeout (the socket timed out) or channel_failed (anything
// else: refused, reset), so the handler's retry verdicts stay the same.
Result<ssh::HttpResponse> AsHttpResponse(const profiling::TargetHttpAnswer& answer, int port);

}  // namespace npuprof::workers
