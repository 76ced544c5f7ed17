// What the service.* handlers run on the target, built without I/O so it can
// be tested: the vLLM argv, the runtime dir's _serve.sh and _start.sh, and the
// constant helper scripts (user values only ever travel as their positional
// arguments, quoted by workers/ssh/shell_quote.h).
//
// Runtime dir layout (<runtime_base>/<run_id>/service-<n>/, every dir 0700,
// checked by service_runtime_dir.h before anything is read or written):
//   launch.json   the launch record (devices, port, argv), 0600, first writer wins
//   _serve.sh     env script sourced, ASCEND_RT_VISIBLE_DEVICES + env exported, exec vllm serve ... (0700)
//   _start.sh     records its own pid in `pid`, then execs _serve.sh (or the wrap script) (0700)
//   .started      created (mkdir, atomic) by the one launch that starts the service
//   pid           pid of the service's process group leader (written by _start.sh)
//   stdout.log, stderr.log (0600)
// The service runs with the runtime dir as its working directory, so relative
// paths in its arguments (e.g. torch_profiler_dir "./vllm_profile") land there.
//
// The service's marker: every process of the service carries
// NPUPROF_SERVICE=<run_id>/service-<n> in its environment from its first
// instant (set before _start.sh is exec'd, inherited by every child). A pid
// is treated as this service's only when /proc/<pid>/environ holds the marker:
// a pid file naming a reused pid is never adopted and never signalled.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "workers/remote_wait.h"

namespace npuprof::workers::service {

using json = nlohmann::json;

// The `vllm serve` argv a launch record's fields give (sm::BuildServeArgv,
// statemachine/serve_argv.h): what a first launch writes as the record's argv.
std::vector<std::string> ServeArgv(const json& launch_record);

// The marker value of the service whose runtime dir is `runtime_dir`:
// "<run_id>/service-<n>" from the dir's last two components (the layout
// sm::ServiceRuntimeDir makes). Invalid when the dir does not end so.
Result<std::string> ServiceMarker(const std::string& runtime_dir);

// The argv _serve.sh runs: the record's argv (what the launch published and
// reports as serve_argv), else (a record without one) ServeArgv(record).
std::vector<std::string> ArgvToRun(const json& launch_record);

// _serve.sh for the launch record (fields: env_script, devices, env, argv).
// Fails only on an invalid env name (validated earlier; checked again here).
Result<std::string> ServeScript(const json& launch_record);

// _start.sh: exports NPUPROF_RUN_ID and the marker, writes the pid file, then
// `exec bash _serve.sh` or `exec bash WRAP _serve.sh RUNTIME` (the env script
// is sourced first when wrapping, so the wrapper finds its tools).
Result<std::string> StartScript(const json& launch_record);

// argv that starts the service once per runtime dir (logs created 0600, the
// marker in the environment), or adopts it: prints "started PID STATE",
// "adopted PID STATE" or "nopid started|adopted"; STATE is alive, dead, or
// foreign (alive but without the marker: the pid was reused, not ours). A
// runtime dir whose _start.sh sets no marker is judged by pid alone.
std::vector<std::string> StartOrAdoptArgv(const std::string& runtime_dir, const std::string& marker);

// Texts of at most this size are written by one command (a launch's
// record and scripts on its stdin, never in a process's arguments: those
// hold user env values and other users of a shared host can read any
// process's arguments); larger ones with file operations.
inline constexpr size_t kMaxInlineFileBytes = size_t{64} << 10;

// argv writing _serve.sh and _start.sh (0700) from stdin, the first
// serve_bytes bytes then start_bytes bytes, when the service was never
// started (no .started yet: then it does nothing). When they cannot be
// written whole it prints "scripts-not-written" on stderr and exits 7 (the
// caller writes them with file operations, which name the cause).
std::vector<std::string> WriteScriptsArgv(const std::string& runtime_dir, size_t serve_bytes, size_t start_bytes);
inline constexpr int kScriptsNotWrittenExit = 7;

// argv writing text to path, private and executable (0700), in one
// command (text in an argument: only for texts without secrets, such as
// the msprof wrap script); exits non-zero when it cannot.
std::vector<std::string> WriteFileArgv(const std::string& path, const std::string& text);

// argv printing "leader=alive|gone|foreign members=N signalled=no" for the
// process group led by pid. Only processes carrying the marker count: the
// leader is "foreign" when the pid is alive without it (reused), members are
// the group's live processes with it (zombies count as gone). A runtime dir
// whose _start.sh sets no marker (written before markers existed) is checked
// by pid alone, as it was then.
std::vector<std::string> GroupStatusArgv(int64_t pid, const std::string& marker, const std::string& runtime_dir);

// The script GroupStatusArgv runs, to end a larger one-command check with
// it: it reads $1=status $2=pgid $3=marker $4=runtime_dir (set them with
// `set --` first) and prints the line ParseGroupStatus reads.
std::string GroupStatusScript();

// Same check, then signal (INT, TERM, KILL) to the process group pgid only
// when it holds a process with the marker: prints the status before the
// signal with signalled=yes|no.
std::vector<std::string> SignalGroupArgv(const std::string& signal, int64_t pgid, const std::string& marker,
                                         const std::string& runtime_dir);

// argv printing a free TCP port on the target (`python3 -S -c`: the standard
// library only, no site start-up), picked below the
// kernel's ephemeral port range so that no outgoing connection takes it
// before the service binds it (binding port 0 where that range is unknown).
std::vector<std::string> FreePortArgv();

// argv for the head of a multi-node deployment, one `python3 -S` run: prints
// "<api> <rpc>" where <api> is a free port (picked as FreePortArgv picks) when pick_api,
// else 0, and <rpc> is "free" when rpc_port can be bound on every interface
// (SO_REUSEADDR, as a listener binds it: a socket in TIME_WAIT does not
// count, a listener on any address does), else "busy:<errno>".
std::vector<std::string> HeadPortsArgv(int32_t rpc_port, bool pick_api);
struct HeadPorts {
  int api = 0;           // 0: not picked
  bool rpc_free = false;
  std::string rpc_why;   // "busy:<errno>" when not free
};
// Reads HeadPortsArgv's line; an error naming what came back otherwise.
Result<HeadPorts> ParseHeadPorts(const std::string& out, bool pick_api);

// argv publishing tmp as final unless final exists (hard link: the first
// writer wins; the runtime dir exists already); prints nothing.
std::vector<std::string> PublishOnceArgv(const std::string& tmp, const std::string& final_path);

// The launch record published in one command: writes its stdin to
// <runtime_dir>/launch.json.tmp-<attempt> (0600), publishes it as
// PublishOnceArgv does, and prints the record in force (at most max_bytes:
// the caller decodes it as launch_record.h says). Exits non-zero, printing
// nothing, when any step fails (the caller then uses file operations).
std::vector<std::string> PublishRecordArgv(const std::string& runtime_dir, uint32_t attempt, size_t max_bytes);

// The readiness wait's check (run by workers/remote_wait.h on the target):
// its signal is the leader gone ("leader=gone"), alive without the marker
// ("leader=foreign"), or alive with uvicorn's "Application startup
// complete." in the service's stdout.log or stderr.log ("leader=alive
// log=ready"); not yet: "leader=alive log=starting". The log line is only a
// hint that the HTTP probe should look now: readiness is what /health and
// /v1/models answer.
RemoteCheck ReadySignalCheck(int64_t pid, const std::string& marker, const std::string& runtime_dir);

// The stop wait's check: its signal is that the process group pgid has no
// live (non-zombie) process left ("members=0"); not yet: "leader=alive" or
// "members=N". Processes are counted without the marker check (a foreign
// process in the group only makes the wait look longer; service.stop checks
// with the marker before it decides anything).
RemoteCheck GroupGoneCheck(int64_t pgid);

struct GroupStatus {
  bool leader_alive = false;    // alive and carrying the marker
  bool leader_foreign = false;  // alive without the marker: the pid now belongs to another process
  int members = 0;              // live group members carrying the marker
  bool signalled = false;       // SignalGroupArgv sent the signal
  bool any_alive() const { return leader_alive || members > 0; }
};
// Parses the output of GroupStatusArgv and SignalGroupArgv.
Result<GroupStatus> ParseGroupStatus(const std::string& out);

}  // namespace npuprof::workers::service
