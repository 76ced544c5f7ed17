// The runtime dirs on a shared host, built without I/O so it can be tested:
// the one script that creates (or only checks) the dirs from the runtime base
// down to a run's dir, the parse of what it reports, and the verdict on the
// files found there.
//
// Promise: nothing is read from or written into a runtime dir the script has
// not accepted. Every dir from the base down is a real directory (not a
// symbolic link), owned by the SSH user and not writable by group or others;
// dirs npuprof creates are 0700 (umask 077, so the base's missing parents
// too). A file npuprof trusts there (launch.json, pid) is a regular file
// owned by the user. Anything else is refused with a message naming the path,
// what is wrong and the fix; nothing is followed, moved or removed.
//
// The runtime base may start with "~/" (the SSH user's home on the target);
// the worker resolves it (service_common.h ResolveRemotePath) before any of
// this runs, so the paths here are absolute.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace npuprof::workers::service {

// argv of the script. create: make missing dirs (0700); else a missing dir
// ends the walk (reported, not an error). dir is base or below it; entries
// are names in dir whose type and owner are reported.
// Exit 0 with a report; exit 5 with "npuprof-refused: <message>" on stderr
// when a dir is refused.
std::vector<std::string> RuntimeDirArgv(bool create, const std::string& base, const std::vector<std::string>& below,
                                        const std::vector<std::string>& entries);

// The components of dir below base ("<base>/a/b" -> {"a","b"}); invalid when
// dir is not base or below it, or a component is empty, "." or "..".
Result<std::vector<std::string>> ComponentsBelow(const std::string& base, const std::string& dir);

struct RuntimeEntry {
  std::string type = "absent";  // absent | file | dir | symlink | other
  int64_t uid = -1;
};

struct RuntimeDirReport {
  int64_t uid = -1;          // the SSH user's uid on the target
  std::string user;          // and name
  bool exists = false;       // every dir down to the run's dir exists (and was accepted)
  std::string missing;       // else the first missing one
  std::map<std::string, RuntimeEntry> entries;
  const RuntimeEntry& Entry(const std::string& name) const;
};

// Parses the script's report (exit 0).
Result<RuntimeDirReport> ParseRuntimeDirReport(const std::string& out);

// The refusal message of exit 5 (the "npuprof-refused:" line), or nullopt.
std::optional<std::string> RuntimeDirRefusal(const std::string& stderr_text);

// Why `name` in dir is not to be trusted as a file npuprof wrote (a symbolic
// link, not a regular file, another owner), or nullopt when it is absent or
// trusted. `what` says what it would have been used for.
std::optional<std::string> UntrustedFile(const RuntimeDirReport& report, const std::string& dir,
                                         const std::string& name, const std::string& what);

}  // namespace npuprof::workers::service
