#include "workers/ssh/command_shell_protocol.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "workers/ssh/env_script_protocol.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::ssh {

std::string CommandShellDriver(std::string_view ready_nonce, std::string_view env_script) {
  // Variables are prefixed __np_ so that the commands' own names never clash.
  // `set +eu`: an rc file's errexit/nounset (or the env script's) must not
  // end the driver when a command fails (each command's own options are
  // whatever it sets). The env script (env_script_protocol.h) is sourced
  // before the ready line, which it may replace with its failure.
  return fmt::format(
      "set +eu\n"
      "__np_rn={0}\n"
      "{1}"
      "set +eu\n"
      "printf '\\n%s:%s\\n' \"$__np_rn\" \"$$\"\n"
      "while IFS=' ' read -r __np_l __np_n; do\n"
      "  case $__np_l in ''|*[!0-9]*) exit 2;; esac\n"
      "  case $__np_n in ''|*[!0-9a-f]*) exit 2;; esac\n"
      "  __np_c=$(head -c \"$__np_l\") || exit 2\n"
      "  case $__np_c in *\"$__np_n\") ;; *) exit 2;; esac\n"
      "  __np_c=${{__np_c%\"$__np_n\"}}\n"
      "  (eval \"$__np_c\") </dev/null\n"
      "  __np_r=$?\n"
      "  printf '\\n%s:%s\\n' \"$__np_n\" \"$__np_r\"\n"
      "  printf '\\n%s\\n' \"$__np_n\" >&2\n"
      "done\n",
      ready_nonce, EnvScriptDriverPrelude(env_script));
}

std::string CommandShellFrame(std::string_view command, std::string_view nonce) {
  const size_t payload = command.size() + 1 + nonce.size();
  std::string f = fmt::format("{} {}\n", payload, nonce);
  f.reserve(f.size() + payload);
  f.append(command);
  f.push_back('\n');
  f.append(nonce);
  return f;
}

namespace {

// Parses 1..max_digits decimal digits at out[pos..] up to a '\n'; returns the
// index of the '\n'.
std::optional<size_t> DigitsThenNewline(std::string_view out, size_t pos, size_t max_digits,
                                        int64_t* value) {
  size_t i = pos;
  while (i < out.size() && i - pos <= max_digits && out[i] >= '0' && out[i] <= '9') ++i;
  if (i == pos || i - pos > max_digits || i >= out.size() || out[i] != '\n') return std::nullopt;
  auto [p, ec] = std::from_chars(out.data() + pos, out.data() + i, *value);
  if (ec != std::errc() || p != out.data() + i) return std::nullopt;
  return i;
}

// Finds "\n<nonce>:<number>\n" at or after `from`, the number 1..max_digits
// digits within [min, max]; a look-alike outside that is skipped.
std::optional<StdoutMarker> FindNumberedMarker(std::string_view out, std::string_view nonce,
                                               size_t from, size_t max_digits, int64_t min,
                                               int64_t max, int64_t* number) {
  const std::string head = fmt::format("\n{}:", nonce);
  for (size_t at = out.find(head, from); at != std::string_view::npos;
       at = out.find(head, at + 1)) {
    int64_t v = 0;
    auto nl = DigitsThenNewline(out, at + head.size(), max_digits, &v);
    if (nl && v >= min && v <= max) {
      *number = v;
      return StdoutMarker{at, *nl + 1, 0};
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> FindShellReady(std::string_view out, std::string_view ready_nonce) {
  // The driver's $$: a positive pid (19 digits hold any int64).
  int64_t pid = 0;
  if (!FindNumberedMarker(out, ready_nonce, 0, 19, 1, std::numeric_limits<int64_t>::max(), &pid)) {
    return std::nullopt;
  }
  return pid;
}

std::optional<StdoutMarker> FindStdoutMarker(std::string_view out, std::string_view nonce,
                                             size_t from) {
  // The shell's $?: 0..255, at most 3 digits, so a marker is never longer than
  // MaxMarkerSize and a re-scan from (size - MaxMarkerSize) cannot miss one.
  int64_t status = 0;
  auto m = FindNumberedMarker(out, nonce, from, 3, 0, 255, &status);
  if (m) m->exit_status = static_cast<int>(status);
  return m;
}

std::optional<size_t> FindStderrMarker(std::string_view err, std::string_view nonce,
                                       size_t from) {
  const std::string m = fmt::format("\n{}\n", nonce);
  size_t at = err.find(m, from);
  if (at == std::string_view::npos) return std::nullopt;
  return at;
}

size_t MaxMarkerSize(std::string_view nonce) { return nonce.size() + 24; }

std::string KillCommandTreeScript(int64_t driver_pid) {
  // Reads every process's parent from /proc/PID/stat (the field after the
  // ")" that closes the command name; no procps needed), collects the whole
  // tree below the driver breadth-first, then signals it at once, so no
  // process can go on to start its next step between the kills.
  return fmt::format(
      "__np_pp=$(for __np_f in /proc/[0-9]*/stat; do\n"
      "  read -r __np_l < \"$__np_f\" 2>/dev/null || continue\n"
      "  __np_p=${{__np_f#/proc/}}; __np_p=${{__np_p%/stat}}\n"
      "  set -- ${{__np_l##*) }}; echo \"$__np_p $2\"\n"
      "done)\n"
      "__np_todo={0}; __np_all=\n"
      "while [ -n \"$__np_todo\" ]; do\n"
      "  __np_next=$(echo \"$__np_pp\" | while read -r __np_a __np_b; do\n"
      "    for __np_q in $__np_todo; do [ \"$__np_b\" = \"$__np_q\" ] && echo \"$__np_a\"; done\n"
      "  done)\n"
      "  __np_todo=$(echo $__np_next); __np_all=\"$__np_all $__np_todo\"\n"
      "done\n"
      "[ -n \"$(echo $__np_all)\" ] && kill -TERM $__np_all 2>/dev/null\n"
      "true\n",
      driver_pid);
}

}  // namespace npuprof::ssh
