// service.stop's remote steps in one command (issue 42): the runtime dir's
// check, the signals, the waits for the process group and the log tails,
// where before each was a command of its own (four to six round trips).
//
// The command runs, on the target, the same ladder service_stop.cc runs
// (steps of a signal and a wait: SIGINT, grace; SIGTERM, grace; SIGKILL,
// 5 s with force), with the same scripts (RuntimeDirArgv, the group script
// of GroupStatusArgv / SignalGroupArgv, GroupGoneCheck, LogTailsArgv) and
// the same rules: a signal is sent only while a process carrying the
// service's marker is alive; a wait ends when the group is gone (its plain
// count, or the marker-checked status asked at least once a second and at
// the end of the grace). It goes only where service.stop needs no decision
// in between (the dir accepted, its start marker there, the pid known), and
// for at most `budget` of waiting; then it says where it stopped, and the
// handler takes the rest step by step, live (StopFold::end).
//
// The first signal is not held up by the check (issue 38): when the pid is
// known and its process is alive with the marker in its environment, the
// command signals it first and checks the dir after; service.stop sends that
// signal on every path then (a refused or missing dir with a known pid is
// still stopped by marker), so only its moment moves. Its record comes where
// the first signal's would, also before an early "live" end, and the
// handler replays it rather than signalling again.
//
// Output, one record a line:
//   npuprof-stop-dir <exit status of the check>, then the check's report
//   npuprof-stop-signal <SIG> <exit status> <the group script's line>
//   npuprof-stop-wait <SIG> gone|alive|pending|failed <waited ms>
//   npuprof-stop-end live|budget|ladder|failed
// then, after a ladder that ended with the group gone or nothing left to
// signal, LogTailsArgv's output for stderr.log and stdout.log.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace npuprof::workers::service {

struct StopStep {
  std::string signal;  // INT | TERM | KILL
  int64_t wait_ms = 0;
};

// runtime_dir_argv: the check's argv (InspectRuntimeDirArgv, check mode,
// entries pid and .started); pid 0 when the handler does not know it (the
// command then ends after the check). exit_wait: while the leader is alive,
// the waits block until it exits (a pidfd, in the machine's Python started as
// "${NPUPROF_PYTHON:-python3}": the command then starts Python, so the
// caller asks for it only where the worker already knows the machine's
// interpreter) instead of looking every 10-50 ms; where that cannot run the
// command naps as without it.
std::vector<std::string> StopInOneArgv(const std::vector<std::string>& runtime_dir_argv, int64_t pid,
                                       const std::string& marker, const std::string& runtime_dir,
                                       const std::vector<StopStep>& steps, std::chrono::milliseconds budget,
                                       uint64_t tail_max_bytes, bool exit_wait = false);

// The most the command prints (its output cap).
size_t StopInOneOutputCap(uint64_t tail_max_bytes);

struct StopSignalRecord {
  std::string signal;
  int exit_status = 0;
  std::string status_line;  // the group script's line (ParseGroupStatus)
};
struct StopWaitRecord {
  std::string signal;
  std::string result;  // gone | alive | pending | failed
  int64_t waited_ms = 0;
};
struct StopFold {
  int dir_exit = 0;
  std::string dir_report;  // the check's lines
  std::vector<std::pair<StopSignalRecord, std::optional<StopWaitRecord>>> steps;
  std::string end;                    // live | budget | ladder | failed
  std::optional<std::string> tails;   // LogTailsArgv's output, when printed
};

// Reads the output (pure). Corruption when a record is malformed or out of
// the order the steps were given in (a signal of step i after step i-1's
// wait, which did not end the ladder), or the end record is missing.
Result<StopFold> ParseStopInOne(const std::string& out, const std::vector<StopStep>& steps);

}  // namespace npuprof::workers::service
