// The readiness wait's slice watched by one Python process on the target
// (service.wait_ready, issue 38), where ready_probe.h's check is a shell
// loop that starts grep processes on every poll (10-50 ms apart) and a new
// python3 for every HTTP probe. The watcher is one `python3 -I -S` for the
// whole slice: it reads /proc/<pid>/stat, /proc/<pid>/environ, the logs
// (only what was appended since its last look) and /proc/net/tcp{,6} itself
// every 5 ms doubling to 10 ms, and asks HTTP in-process (npuprof's
// on-target client, workers/profiling/target_http_client.h) the moment a
// hint appears: a service that becomes ready is seen within about 10 ms
// without an interpreter's start, and the polls cost no process each.
//
// It decides what ReadyProbeCheck's check decides, poll for poll: the
// leader gone (no stat, or a zombie) or not the service's (its environment
// lacks NPUPROF_SERVICE=<marker>, unless the runtime dir's _start.sh names no
// marker at all; a leader whose environment is empty is looked at again
// every 0.1 s for up to 2 s, and one that exited meanwhile is gone, not
// foreign); the hint (uvicorn's start-up line in stderr.log or stdout.log,
// else a listener on the port); probes spaced 100 ms doubling to 1 s while
// the hint holds and HTTP does not agree. Its output is the remote wait's
// (workers/remote_wait.h: "npuprof-wait signal|timeout polls=N waited_ms=M",
// then the observation ParseReadyObservation reads, never
// probe=unavailable). Read-only.
//
// No output of that form (no python3 there, or one too old to compile it:
// Python 3.6+ and the standard library are all it needs) means it did not
// run: the handler then watches with ReadyProbeCheck's shell loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace npuprof::workers::service {

// `python3 -I -S -c PROGRAM` with the slice, pid, marker, runtime dir,
// port and served name as its words (pure; RunRemote starts the machine's
// resolved interpreter for it: workers/profiling/interpreter_command.h).
std::vector<std::string> ReadyWatchArgv(int64_t pid, const std::string& marker, const std::string& runtime_dir,
                                        int port, const std::string& served, std::chrono::milliseconds slice);

}  // namespace npuprof::workers::service
