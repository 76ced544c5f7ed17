#include "workers/ssh/env_script_protocol.h"

#include <charconv>

#include <fmt/format.h>

#include "workers/ssh/shell_quote.h"

namespace npuprof::ssh {
namespace {

constexpr std::string_view kPrefixLine = "npuprof: the env script ";
constexpr std::string_view kPrefixEnd = " before the command ran\n";

std::string Tail(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  while (!s.empty() && (s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  if (s.size() > kEnvScriptShownBytes) s.remove_prefix(s.size() - kEnvScriptShownBytes);
  return std::string(s);
}

// 1..3 digits, 0..255, then '\n' at out[pos..]: the status, or nullopt.
std::optional<int> StatusAt(std::string_view out, size_t pos) {
  size_t end = pos;
  while (end < out.size() && end - pos < 4 && out[end] >= '0' && out[end] <= '9') ++end;
  if (end == pos || end - pos > 3 || end >= out.size() || out[end] != '\n') return std::nullopt;
  int v = 0;
  std::from_chars(out.data() + pos, out.data() + end, v);
  if (v > 255) return std::nullopt;
  return v;
}

}  // namespace

std::string EnvScriptDriverPrelude(std::string_view env_script) {
  if (env_script.empty()) return "";
  const std::string q = ShellQuote(env_script);
  // The EXIT trap reports a script that exits the driver; `2>&1 >/dev/null`
  // sends the script's stderr to the driver's stdout (read up to the ready
  // line) and drops its stdout.
  return fmt::format(
      "if [ -f {0} ]; then\n"
      "  printf '\\n%s:env\\n' \"$__np_rn\"\n"
      "  trap 'printf \"\\n%s:env-exit:%s\\n\" \"$__np_rn\" \"$?\"' EXIT\n"
      "  . {0} 2>&1 >/dev/null </dev/null\n"
      "  __np_er=$?\n"
      "  trap - EXIT\n"
      "  if [ \"$__np_er\" != 0 ]; then printf '\\n%s:env-status:%s\\n' \"$__np_rn\" \"$__np_er\"; exit 3; fi\n"
      "  __np_env={0}\n"
      "fi\n",
      q);
}

std::string EnvScriptPrefix(std::string_view env_script) {
  const std::string q = ShellQuote(env_script);
  // Skipped under a driver that sourced this very file (__np_env) and when
  // the file does not exist; its stderr goes where the command's goes.
  return fmt::format(
      "{{ [ \"${{__np_env-}}\" = {0} ] || [ ! -f {0} ] || {{ __np_es={0}; "
      "trap 'printf \"\\nnpuprof: the env script %s exited %s before the command ran\\n\" \"$__np_es\" \"$?\" >&2' EXIT; "
      ". {0} >/dev/null </dev/null; __np_er=$?; trap - EXIT; "
      "[ \"$__np_er\" = 0 ] || {{ printf '\\nnpuprof: the env script %s returned %s before the command ran\\n' "
      "\"$__np_es\" \"$__np_er\" >&2; exit 125; }}; }}; }} ; ",
      q);
}

std::optional<EnvScriptFailure> FindEnvScriptFailure(std::string_view out, std::string_view ready_nonce) {
  const std::string start = fmt::format("\n{}:env\n", ready_nonce);
  const size_t begin = out.find(start);
  if (begin == std::string_view::npos) return std::nullopt;
  const size_t text = begin + start.size();
  for (const auto& [tag, exited] : {std::pair<std::string_view, bool>{"env-exit", true}, {"env-status", false}}) {
    const std::string head = fmt::format("\n{}:{}:", ready_nonce, tag);
    for (size_t at = out.find(head, text); at != std::string_view::npos; at = out.find(head, at + 1)) {
      if (auto st = StatusAt(out, at + head.size())) {
        EnvScriptFailure f;
        f.exited = exited;
        f.status = *st;
        f.stderr_tail = Tail(out.substr(text, at - text));
        return f;
      }
    }
  }
  return std::nullopt;
}

std::optional<EnvScriptFailure> FindEnvScriptFailureInStderr(std::string_view err) {
  const std::string head = "\n" + std::string(kPrefixLine);
  const size_t at = err.rfind(head);
  if (at == std::string_view::npos) return std::nullopt;
  const size_t end = err.find(kPrefixEnd, at);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view line = err.substr(at + head.size(), end - at - head.size());  // "<path> exited N"
  EnvScriptFailure f;
  size_t verb = line.rfind(" exited ");
  f.exited = verb != std::string_view::npos;
  if (!f.exited) verb = line.rfind(" returned ");
  if (verb == std::string_view::npos) return std::nullopt;
  const std::string_view num = line.substr(line.find(' ', verb + 1) + 1);
  int v = -1;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (ec != std::errc() || p != num.data() + num.size() || v < 0 || v > 255) return std::nullopt;
  f.status = v;
  f.stderr_tail = Tail(err.substr(0, at));
  return f;
}

std::string DescribeEnvScriptFailure(const EnvScriptFailure& f, std::string_view env_script,
                                     std::string_view endpoint) {
  std::string out = f.exited ? fmt::format("the env script '{}' exited {} on {} before any command could run",
                                           env_script, f.status, endpoint)
                             : fmt::format("the env script '{}' returned {} on {} (sourcing it must end with status "
                                           "0), so no command ran",
                                           env_script, f.status, endpoint);
  out += f.stderr_tail.empty() ? std::string("; it printed nothing on stderr")
                               : fmt::format("; its stderr: {}", f.stderr_tail);
  return out;
}

}  // namespace npuprof::ssh
