// A first launch's remote steps in one command (service.launch, issue 42):
// the launch record published (first writer wins), the scripts written and
// the service started or adopted, where before they were three commands
// (PublishRecordArgv, WriteScriptsArgv, StartOrAdoptArgv; service_scripts.h)
// with no decision of npuprof's needed between them when the record in
// force is the one this attempt wrote.
//
// The command reads the record (record_bytes), _serve.sh (serve_bytes) and
// _start.sh (start_bytes) into temp files of the attempt, from its stdin
// (LaunchTexts::kStdin: a channel of its own, three round trips) or from the
// environment (kEnv: the variables of LaunchInOneEnv, exported by the
// command itself, which then runs in the connection's command shell, one
// round trip: SshSession::ExecInCommandShell; the texts hold user env values
// and are never a process's argument),
// publishes the record as PublishRecordArgv does, and then:
//  * when the record in force is byte for byte this one: writes the scripts
//    (0700) unless the service was started already, and runs the
//    start-or-adopt script; prints "own-record\n" then that script's line
//    ("started|adopted PID STATE" or "nopid ...", its exit status with it);
//  * when another attempt's record is in force: writes nothing more, prints
//    "other-record\n" then that record (at most max_record_bytes) and exits
//    0: the caller decodes it and goes on with the steps one by one;
//  * when it cannot write what it read: exits 5 (temp files) or 7 (the
//    scripts) with nothing on stdout; 6 when the record in force is not a
//    regular file. The caller then takes the steps one by one (they name
//    the cause), which re-delivery already makes safe: publishing again
//    finds the record in force, scripts are not written once the service
//    started, and a started service is adopted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace npuprof::workers::service {

enum class LaunchTexts { kStdin, kEnv };

std::vector<std::string> LaunchInOneArgv(const std::string& runtime_dir, uint32_t attempt, size_t record_bytes,
                                         size_t serve_bytes, size_t start_bytes, size_t max_record_bytes,
                                         const std::string& marker, LaunchTexts from);

// The environment of a kEnv command (for BuildRemoteScriptChecked's env).
std::vector<std::pair<std::string, std::string>> LaunchInOneEnv(const std::string& record, const std::string& serve,
                                                                 const std::string& start);

struct LaunchInOneOutput {
  bool own_record = false;  // else another attempt's record is in force
  std::string record;       // other-record: the record in force, as printed
  std::string start_line;   // own-record: the start-or-adopt script's output
};

// Reads the command's stdout (pure): what comes before the first line
// "own-record" or "other-record" (an env script's banner) is skipped;
// Corruption when there is no such line.
Result<LaunchInOneOutput> ParseLaunchInOne(std::string_view out);

}  // namespace npuprof::workers::service
