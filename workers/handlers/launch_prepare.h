// A first launch's runtime dir check and port pick in one remote command
// (service.launch, issue 42), where before they were two: the check
// (RuntimeDirArgv, service_runtime_dir.h) and, once it showed a first
// launch, the port pick (FreePortArgv, service_scripts.h). No decision of
// npuprof's is needed between them: the port is picked on the target when
// the check accepted the dir and none of the first-launch entries
// (launch.json, .started, pid) is there; else the command ends after the
// check and the launch goes on as before (a re-delivered launch reads the
// record in force and adopts).
//
// The head of a multi-node deployment told its data-parallel RPC port
// (issue 37): on a first launch the same command checks that port and, when
// pick_api, picks the API port (HeadPortsArgv's program), where before a
// command of its own did that after the check: one round trip less on the
// head's launch, the one a 2-node run waits for.
//
// Output: the check's report as it printed it (ParseRuntimeDirReport reads
// it and skips the other lines), then, when a port was asked for, one line
// "npuprof-port <port>" (python3's answer) or "npuprof-port-failed" (its
// error on stderr); for the head, "npuprof-head-ports <api> free|busy:<errno>"
// (HeadPortsArgv's line) or "npuprof-head-ports-failed". The check's exit status is the command's; a refusal is
// on stderr as the check writes it (RuntimeDirReportOf reads both).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "workers/handlers/service_scripts.h"

namespace npuprof::workers::service {

// runtime_dir_argv: the check's argv (InspectRuntimeDirArgv); first_entries:
// the names whose absence in runtime_dir makes a first launch (safe names);
// pick_port: ask for a port at all (else the command is the check alone).
std::vector<std::string> LaunchPrepareArgv(const std::vector<std::string>& runtime_dir_argv,
                                           const std::string& runtime_dir,
                                           const std::vector<std::string>& first_entries, bool pick_port);

// The head's form: the check, then on a first launch HeadPortsArgv(rpc_port, pick_api).
std::vector<std::string> LaunchPrepareHeadArgv(const std::vector<std::string>& runtime_dir_argv,
                                               const std::string& runtime_dir,
                                               const std::vector<std::string>& first_entries, int32_t rpc_port,
                                               bool pick_api);

struct PreparedPort {
  bool asked = false;  // the target saw a first launch and ran the pick
  int port = 0;        // 1..65535; 0 when the pick failed
  std::string error;   // the caller's: why it failed (the command's stderr)
};

// The port line of the output (pure): not asked when there is none;
// Corruption when there are several, or the line is neither form.
Result<PreparedPort> ParsePreparedPort(std::string_view out);

struct PreparedHeadPorts {
  bool asked = false;              // the target saw a first launch and ran the check
  std::optional<HeadPorts> ports;  // unset when the check's python3 failed
};

// The head's line of the output (pure): not asked when there is none;
// Corruption when there are several, or the line is neither form
// (ParseHeadPorts reads the ports).
Result<PreparedHeadPorts> ParsePreparedHeadPorts(std::string_view out, bool pick_api);

}  // namespace npuprof::workers::service
