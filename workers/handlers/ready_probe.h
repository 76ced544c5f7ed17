// The readiness wait run on the target (service.wait_ready, issue 42): one
// remote wait (workers/remote_wait.h) whose check looks at the service's
// leader (as ReadySignalCheck does: gone, not ours), then for a hint that the
// service may answer (uvicorn's "Application startup complete." in its logs,
// or a listener on its port in /proc/net/tcp{,6}), and only then asks it:
// GET /health and GET /v1/models on 127.0.0.1:<port>, from a short python3
// run on the target (`-I -S`, npuprof's on-target HTTP client over a plain
// socket, workers/profiling/target_http_client.h: no site, no http.client
// import). The probe's answer ends the slice when it says ready,
// so a service that becomes ready during a slice costs the one round trip
// that started it. Probes are spaced 100 ms doubling to 1 s while the hint
// holds and HTTP does not agree yet; no hint, no probe.
//
// Observation (`obs` of the wait's last poll), one of:
//   leader=gone | leader=foreign   (a leader found without the marker is
//       looked at again: one that exited meanwhile, its environment gone
//       before its pid, is gone, not foreign)
//   leader=alive hint=none
//   leader=alive hint=log|port probes=N probe=unavailable     (python3 missing or
//       the probe printed no verdict: the handler falls back to HTTP over
//       SSH, the path of service_wait_ready.cc before this)
//   leader=alive hint=log|port probes=N probe=yes|no {"health":H,"models":M,
//       "ids":[...],"error":"..."}   (the probe's last answer; a poll
//       between probes repeats it; N: the probes run in this slice)
// ParseReadyObservation reads it strictly (pure); the handler decides
// readiness itself from health and ids (the probe's own yes/no only ends
// the slice early).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/remote_wait.h"

namespace npuprof::workers::service {

// The HTTP probe's Python definition, npuprof_ready_probe(port, served) ->
// (ok, line): GET /health, then /v1/models when it answered 200; ok when
// served is among the ids; line is "yes|no " + the answers as JSON (ASCII).
// Bodies kept up to 64 KiB (read up to 1 MiB); at most 64 ids of at most
// 1 KiB each; an exception is named in the answers' "error". Placed after
// the on-target HTTP client's definition (workers/profiling/target_http_client.h);
// both the shell check's probe program and ready_watch.h's watcher use it.
extern const char* const kReadyProbePy;

// The check for RunRemoteWait; pid, marker and runtime_dir as
// ReadySignalCheck takes them, port and served name for the probe.
RemoteCheck ReadyProbeCheck(int64_t pid, const std::string& marker, const std::string& runtime_dir, int port,
                            const std::string& served);

struct ReadyObservation {
  enum class Leader { kGone, kForeign, kAlive };
  enum class Probe { kNone, kUnavailable, kAnswered };
  Leader leader = Leader::kAlive;
  std::string hint;  // "none", "log" or "port" (alive only)
  Probe probe = Probe::kNone;
  bool probe_said_ready = false;
  int probes = 0;          // python3 runs in this slice
  int health = 0;          // /health's status (0: no answer)
  int models_status = 0;   // /v1/models's status (0: not asked or no answer)
  std::vector<std::string> ids;  // /v1/models data[].id
  std::string error;       // the probe's own error text ("" when none)
};

// Reads an observation as the header describes it; Corruption naming the
// part that is not as described.
Result<ReadyObservation> ParseReadyObservation(std::string_view obs);

// Ready: /health answered 200 and /v1/models lists `served`.
bool ProbeSaysReady(const ReadyObservation& o, const std::string& served);

// What the last probe saw, in the words of the SSH path's observations
// ("/health answered 503", "/v1/models answered 200 without 'x' (lists
// [...])", "/health: <error>", "ready"); "no hint yet (...)" without one.
std::string DescribeObservation(const ReadyObservation& o, const std::string& served);

}  // namespace npuprof::workers::service
