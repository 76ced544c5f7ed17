// How the machine's env script (machine add --env-script, e.g. the Ascend
// toolkit's set_env.sh) is sourced on the target, and how its failure is
// told (pure: text in, text out; no I/O).
//
// The script is sourced in two places: once by the command shell's driver
// when it starts (command_shell_protocol.h), and by the prefix of every
// remote script built with BuildRemoteScript (shell_quote.h) that does not
// run under a driver which sourced that same file (a command on its own
// channel, a detached service). In both it must leave status 0: a script
// that exits, or whose status is not 0, is a failure that names the script,
// its status and what it printed on stderr, instead of a command that then
// runs without its environment (and blames the tool it could not find). A
// script that does not exist is skipped, as before: a missing tool then
// names it (workers/remote.h, EnvScriptHint).
//
// Driver: between "\n<ready>:env\n" and "\n<ready>:env-exit:<N>\n" (it
// exited: the shell is gone) or "\n<ready>:env-status:<N>\n" (it returned
// N; the driver then exits) on stdout comes the script's stderr; its stdout
// is discarded. Prefix: on failure it writes
// "\nnpuprof: the env script <path> exited|returned <N> before the command ran\n"
// to stderr, after what the script printed there; a script that returned N
// ends the command with status 125.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace npuprof::ssh {

// The driver's part (POSIX sh; $__np_rn holds the ready nonce when it runs):
// sources env_script once if it exists and records it in __np_env.
std::string EnvScriptDriverPrelude(std::string_view env_script);

// BuildRemoteScript's prefix for env_script (non-empty), ending in " ; ".
std::string EnvScriptPrefix(std::string_view env_script);

struct EnvScriptFailure {
  bool exited = false;  // it called exit (or a special builtin failed): nothing could run
  int status = 0;
  std::string stderr_tail;  // the last kMaxShownBytes of what it printed on stderr, as bytes
};
inline constexpr size_t kEnvScriptShownBytes = 2048;

// In the driver's output before its ready line; nullopt when the script did
// not fail (or there is none).
std::optional<EnvScriptFailure> FindEnvScriptFailure(std::string_view driver_out, std::string_view ready_nonce);
// In a command's stderr (the prefix's line); nullopt when absent.
std::optional<EnvScriptFailure> FindEnvScriptFailureInStderr(std::string_view stderr_text);

// "the env script '<path>' exited 1 on <endpoint> before any command could
// run; its stderr: ..." (or "returned 1 ... (it must end with status 0)").
std::string DescribeEnvScriptFailure(const EnvScriptFailure& f, std::string_view env_script,
                                     std::string_view endpoint);

}  // namespace npuprof::ssh
