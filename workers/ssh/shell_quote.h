// THE quoting routine of npuprof (architecture principle 9): remote commands are
// built from argv, never concatenated. Every user-supplied value (paths, names,
// JSON blobs, env values) goes through ShellQuote/BuildCommand; names and tags
// are validated with ValidateSafeName before anything runs remotely.
//
// Target shell: POSIX sh family (dash, bash, busybox ash, zsh). The remote
// login shell of the SSH user must be one of these.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace npuprof::ssh {

// Quotes one word for POSIX sh. Words made only of [A-Za-z0-9_@%+=:,./-] (and
// not empty) are returned unchanged for readable logs; everything else is
// wrapped in single quotes with each ' written as '\''. Safe for every byte
// except NUL, which no POSIX argv can carry: a NUL always ends up inside an
// open quote, so the shell reports a syntax error and runs nothing.
std::string ShellQuote(std::string_view word);

// Joins ShellQuote(argv[i]) with single spaces. Empty argv gives "".
std::string BuildCommand(const std::vector<std::string>& argv);

// A name usable as a shell variable: [A-Za-z_][A-Za-z0-9_]*.
Status ValidateEnvName(std::string_view name);

// A tag/name used in paths and commands: 1..128 chars of [A-Za-z0-9._-], not
// "." or "..", not starting with '-'. The error message names `field`, the
// offending character and the fix.
Status ValidateSafeName(std::string_view field, std::string_view value);

// Builds the remote script that sources `env_script` (if it exists; its
// stdout dropped, its stderr kept, a failure named: env_script_protocol.h),
// exports `env`, and execs argv:
//   <EnvScriptPrefix(s)> export K='v' ...; exec 'a' 'b'
// The source is skipped in the command shell of a connection that sourced
// that same file when it started (command_shell_protocol.h): the set_env.sh
// of a real toolkit costs ~0.1 s, once per connection instead of per command.
// Precondition: every env name passes ValidateEnvName. If one does not, the
// returned script only prints an error and exits 2 (nothing is executed); use
// BuildRemoteScriptChecked to get the error as a Status instead.
std::string BuildRemoteScript(const std::string& env_script,
                              const std::vector<std::pair<std::string, std::string>>& env,
                              const std::vector<std::string>& argv);

// Same as BuildRemoteScript but validates env names and a non-empty argv.
Result<std::string> BuildRemoteScriptChecked(
    const std::string& env_script,
    const std::vector<std::pair<std::string, std::string>>& env,
    const std::vector<std::string>& argv);

}  // namespace npuprof::ssh
