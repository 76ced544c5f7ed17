#include "workers/profiling/interpreter_command.h"

#include <string_view>

#include "workers/profiling/target_interpreter.h"
#include "workers/ssh/shell_quote.h"

namespace npuprof::profiling {

namespace {

constexpr std::string_view kResolvedLine = "npuprof-python-resolved ";
constexpr std::string_view kGoneLine = "npuprof-python-gone";

// Prints sys.executable's bytes (no newline) when it is absolute, has no
// control byte and is executable; nothing otherwise.
constexpr std::string_view kResolver =
    "import os, sys\n"
    "e = sys.executable or ''\n"
    "b = os.fsencode(e)\n"
    "if b.startswith(b'/') and all(0x20 <= c != 0x7f for c in b) and os.access(e, os.X_OK):\n"
    "    sys.stdout.buffer.write(b)\n";

std::string ResolveText() {
  return "unset NPUPROF_PYTHON; if __np_py=$(python3 -c " + ssh::ShellQuote(kResolver) +
         " </dev/null 2>/dev/null) && [ -n \"$__np_py\" ]; then export NPUPROF_PYTHON=\"$__np_py\"; "
         "printf '\\n" + std::string(kResolvedLine) + "%s\\n' \"$__np_py\" >&2; fi; ";
}

}  // namespace

bool StartsPython(const std::vector<std::string>& argv) {
  if (argv.empty()) return false;
  if (argv[0] == kDefaultInterpreter) return true;
  for (const auto& a : argv)
    if (a.find("NPUPROF_PYTHON") != std::string::npos) return true;
  return false;
}

std::vector<std::string> InterpreterArgv(const std::vector<std::string>& argv,
                                         const std::optional<std::string>& cached) {
  std::string script;
  if (cached) {
    const std::string q = ssh::ShellQuote(*cached);
    script = "if [ -x " + q + " ] && [ ! -d " + q + " ]; then export NPUPROF_PYTHON=" + q +
             "; else printf '\\n" + std::string(kGoneLine) + "\\n' >&2; " + ResolveText() + "fi; ";
  } else {
    script = ResolveText();
  }
  std::vector<std::string> out{"sh", "-c", "", "npuprof-python"};
  if (!argv.empty() && argv[0] == kDefaultInterpreter) {
    script += "exec " + std::string(kPythonRef) + " \"$@\"";
    out.insert(out.end(), argv.begin() + 1, argv.end());
  } else {
    script += "exec \"$@\"";
    out.insert(out.end(), argv.begin(), argv.end());
  }
  out[2] = std::move(script);
  return out;
}

InterpreterNews TakeInterpreterNews(std::string* stderr_text) {
  InterpreterNews news;
  std::string& s = *stderr_text;
  // The wrapper writes its lines before the program runs, each preceded by
  // a newline; take every line of ours, wherever it is.
  size_t at = 0;
  while (at < s.size()) {
    const size_t nl = s.find('\n', at);
    const size_t end = nl == std::string::npos ? s.size() : nl;
    const std::string_view line(s.data() + at, end - at);
    const bool resolved = line.rfind(kResolvedLine, 0) == 0;
    const bool gone = line == kGoneLine;
    if (!resolved && !gone) {
      at = nl == std::string::npos ? s.size() : nl + 1;
      continue;
    }
    if (gone) news.gone = true;
    if (resolved) {
      auto path = CheckInterpreterPath(line.substr(kResolvedLine.size()));
      if (path.ok()) news.resolved = std::move(path).value();
    }
    // Remove the line, its newline, and the newline the wrapper put before it.
    size_t from = at, to = nl == std::string::npos ? s.size() : nl + 1;
    if (from > 0 && s[from - 1] == '\n') --from;
    s.erase(from, to - from);
    at = from;
  }
  return news;
}

bool InterpreterDidNotStart(int exit_status, const std::string& stdout_text) {
  return (exit_status == 126 || exit_status == 127) && stdout_text.empty();
}

}  // namespace npuprof::profiling
