// The target's Python interpreter, resolved once per machine (issue 37).
//
// npuprof's short programs on the target (the HTTP exchanges of
// target_http.h) are started as `python3`. On many hosts that name is a
// version manager's shim (pyenv, asdf: a bash script that runs `pyenv
// exec`), which costs ten times the interpreter's own start (about 0.34 s
// of CPU against 0.03 s measured on this project's build machine). So the
// first exchange on a machine asks `python3` which interpreter it is
// (sys.executable, sent back base64 in its digest, only when it names an
// absolute path the program itself can execute), and the later exchanges
// of this worker process start that path directly.
//
// What is cached: one absolute path per machine, keyed by the SSH endpoint
// and the machine's env script (InterpreterKey), in this worker process's
// memory only: not in the event log, not on disk. A worker restart asks
// again. Why it is safe: the path is what `python3` ran as on that machine
// under that env script; the programs need the standard library only and
// get the same flags; a path that stops working (the interpreter removed
// or replaced: the shell's exit 127 or 126, or any start that never printed
// the program's first line, so nothing was sent) is forgotten, and the same
// exchange runs again with `python3`, which asks again.
//
// Since issue 38 the same cache serves every Python program npuprof starts
// on the target, through the remote-command layer (RunRemote,
// interpreter_command.h): the first such command on a machine learns the
// path from `python3` in the same round trip.
//
// Pure apart from the cache's mutex: no I/O.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace npuprof::profiling {

// The most bytes an interpreter path may have.
inline constexpr size_t kMaxInterpreterPathBytes = 1024;

// The name the programs run under before the interpreter is known.
inline constexpr std::string_view kDefaultInterpreter = "python3";

// The interpreter path as the program reported it (bytes), checked: absolute,
// 1..kMaxInterpreterPathBytes bytes, no control byte (NUL, newline, DEL...),
// no "." or ".." component, no empty component, not ending in '/'. Invalid
// names what is wrong.
Result<std::string> CheckInterpreterPath(std::string_view bytes);

// The cache key of a machine: "<user>@<host>:<port>|<env script>" (the env
// script may put another python3 first on PATH).
std::string InterpreterKey(std::string_view endpoint, std::string_view env_script);

// Interpreter paths by machine key; thread-safe.
class TargetInterpreters {
 public:
  std::optional<std::string> Get(const std::string& key) const;
  // Keeps path for key (replacing any); path must have passed CheckInterpreterPath.
  void Put(const std::string& key, std::string path);
  // Forgets key's path if it is still `path` (another exchange may have put
  // a newer one meanwhile).
  void Forget(const std::string& key, const std::string& path);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> paths_;
};

// This process's cache (one per worker process).
TargetInterpreters& WorkerInterpreters();

}  // namespace npuprof::profiling
