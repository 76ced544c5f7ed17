// The command shell protocol (pure: text in, text out; no I/O).
//
// A remote command normally costs a new SSH channel and a new login shell on
// the target (sshd runs `$SHELL -c CMD`, and bash then sources ~/.bashrc —
// ~100 ms on a machine with pyenv or the Ascend set_env.sh in its rc file).
// Instead, SshSession starts ONE long-lived "command shell" per connection —
// the driver below, run by the user's login shell exactly like any command,
// so it sees the same environment — and sends it framed commands on stdin:
//
//   frame   = "<L> <nonce>\n" + payload           (L = payload size in bytes)
//   payload = command + "\n" + nonce
//
// The driver reads the header with `read`, exactly L bytes with `head -c`,
// refuses a payload that does not end in the nonce (a frame cut short by a
// dying connection never runs), runs the command in a subshell
// `( eval "$cmd" ) </dev/null`, then writes the end markers
//
//   stdout: "\n<nonce>:<exit status>\n"        stderr: "\n<nonce>\n"
//
// Each command gets a fresh random nonce that appears nowhere in any process's
// argv, so no output can fake an end marker. Output is byte-exact: the output
// of the command is everything before the marker's leading "\n".
//
// Semantics versus one channel per command: the same shell, environment and
// rc-file state; stdin is /dev/null; the exit status of a command killed by
// signal N is 128+N (the shell's $?); `$$` is the driver's pid, as in any
// subshell (a script that needs its own pid runs under `sh -c`, as
// npuprof's scripts do).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace npuprof::ssh {

// The driver script (POSIX sh), run as the exec command of the shell channel.
// With an env_script (the machine's, e.g. the toolkit's set_env.sh) it first
// sources that file once, if it exists (output discarded, stdin /dev/null),
// and records it in __np_env: every command then runs in a subshell that
// inherits that environment, and the prefix BuildRemoteScript writes skips
// sourcing it again (shell_quote.h). Then it writes
// "\n<ready_nonce>:<its pid>\n" to stdout.
std::string CommandShellDriver(std::string_view ready_nonce, std::string_view env_script = {});

// One frame carrying `command` (no NUL) under `nonce` ([0-9a-f]+).
std::string CommandShellFrame(std::string_view command, std::string_view nonce);

// Finds "\n<ready_nonce>:<pid>\n" in the driver's first output (anything an
// rc file printed before it is ignored; a pid that is not 1..2^63-1 is no
// ready line). nullopt until it is complete.
std::optional<int64_t> FindShellReady(std::string_view out, std::string_view ready_nonce);

struct StdoutMarker {
  size_t begin = 0;     // index of the marker's leading '\n' = size of the command's output
  size_t end = 0;       // index just past the marker
  int exit_status = 0;  // as the driver's shell reported it (0..255)
};
// Searches `out` from index `from` (a caller re-scanning a growing buffer
// passes the previous size minus MaxMarkerSize) for the stdout marker: the
// status is 1-3 digits and 0..255, anything else after the nonce is no
// marker. nullopt until a complete marker is present.
std::optional<StdoutMarker> FindStdoutMarker(std::string_view out, std::string_view nonce,
                                             size_t from = 0);
// Index of the stderr marker's leading '\n' (= size of the command's stderr).
std::optional<size_t> FindStderrMarker(std::string_view err, std::string_view nonce,
                                       size_t from = 0);
// Longest marker FindStdoutMarker can match, for re-scan offsets.
size_t MaxMarkerSize(std::string_view nonce);

// A script (for a separate channel) that sends TERM to every process below
// `driver_pid` (the running command and all its descendants, found through
// /proc, at once); a service detached with setsid is no longer below it and
// is left alone.
std::string KillCommandTreeScript(int64_t driver_pid);

}  // namespace npuprof::ssh
