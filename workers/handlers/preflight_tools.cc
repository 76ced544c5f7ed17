#include "workers/handlers/preflight_tools.h"

#include <fmt/format.h>

#include "common/base64.h"

namespace npuprof::workers {

namespace {

// $1 = the most help bytes to print. The help's exit status travels after
// its text inside the substitution (a pipe would lose it); the text keeps
// its bytes (only a trailing newline added by the separator goes).
// The Python check runs beside `msprof --help` (both are interpreter
// starts on the target, issue 38): in the background of the substitution
// that reads the help, whose own output waits for it, so its one line comes
// first there and is put back after the help line here (no temp file, no
// tool but the shell's).
constexpr const char* kTools = R"SH(printf '' | base64 -w 0 >/dev/null 2>&1 || { echo "no base64 -w here" >&2; exit 3; }
echo "npuprof-preflight 1"
p=$(command -v msprof 2>/dev/null || which msprof 2>/dev/null)
p=${p%%
*}
if [ -z "$p" ]; then echo msprof-missing; exit 0; fi
echo "msprof $(printf '%s' "$p" | base64 -w 0)"
both=$(
  { for c in "${NPUPROF_PYTHON:-python3}" python; do
      if x=$("$c" -c 'import sys, torch_npu; print(sys.executable)' 2>/dev/null </dev/null); then
        echo "python $(printf '%s' "${x%%
*}" | base64 -w 0)"
        exit 0
      fi
    done
    echo python-missing; } &
  h=$(msprof --help 2>&1 </dev/null; printf '\nnpuprof-rc=%s' "$?")
  rc=${h##*npuprof-rc=}; h=${h%?npuprof-rc=*}
  hl="help $rc $(printf '%s' "$h" | head -c "$1" | base64 -w 0)"
  wait
  printf '%s\n' "$hl")
py=${both%%
*}
printf '%s\n%s\n' "${both#*
}" "$py")SH";

Result<std::string> Field(std::string_view line, std::string_view name, const char* what) {
  auto bytes = DecodeBase64(line.substr(name.size()));
  if (!bytes.ok()) return Status::Corruption(fmt::format("the preflight's {}: {}", what, bytes.status().message()));
  return std::move(*bytes);
}

}  // namespace

std::vector<std::string> PreflightToolsArgv() {
  return {"sh", "-c", kTools, "npuprof-preflight", std::to_string(kMaxHelpBytes)};
}

Result<PreflightTools> ParsePreflightTools(const std::string& out) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < out.size() && lines.size() < 6) {
    const size_t nl = out.find('\n', pos);
    const size_t end = nl == std::string::npos ? out.size() : nl;
    lines.push_back(std::string_view(out).substr(pos, end - pos));
    pos = nl == std::string::npos ? out.size() : nl + 1;
  }
  if (lines.empty() || lines[0] != "npuprof-preflight 1")
    return Status::Corruption("the preflight's tool check did not print its 'npuprof-preflight 1' header");
  PreflightTools t;
  if (lines.size() == 2 && lines[1] == "msprof-missing") return t;
  if (lines.size() != 4)
    return Status::Corruption(fmt::format("the preflight's tool check printed {} lines, not 2 or 4", lines.size()));
  if (lines[1].substr(0, 7) != "msprof ") return Status::Corruption("the preflight's second line is not 'msprof <path>'");
  auto path = Field(lines[1], "msprof ", "msprof path");
  if (!path.ok()) return path.status();
  if (path->empty()) return Status::Corruption("the preflight's msprof path is empty");
  t.msprof_found = true;
  t.msprof_path = std::move(*path);
  const std::string_view help = lines[2];
  if (help.substr(0, 5) != "help ") return Status::Corruption("the preflight's third line is not 'help <status> <text>'");
  const size_t sp = help.find(' ', 5);
  if (sp == std::string_view::npos) return Status::Corruption("the preflight's help line has no text field");
  const std::string_view rc = help.substr(5, sp - 5);
  if (rc.empty() || rc.size() > 3 || rc.find_first_not_of("0123456789") != std::string_view::npos)
    return Status::Corruption(fmt::format("the preflight's help exit status {:?} is not a number 0..255",
                                          std::string(rc.substr(0, 16))));
  t.help_exit = std::stoi(std::string(rc));
  auto text = Field(help.substr(sp + 1), "", "help text");
  if (!text.ok()) return text.status();
  if (text->size() > kMaxHelpBytes) return Status::Corruption("the preflight's help text is over its cap");
  t.help_text = std::move(*text);
  if (lines[3] == "python-missing") return t;
  if (lines[3].substr(0, 7) != "python ")
    return Status::Corruption("the preflight's last line is neither 'python <path>' nor 'python-missing'");
  auto py = Field(lines[3], "python ", "Python path");
  if (!py.ok()) return py.status();
  if (py->empty()) return Status::Corruption("the preflight's Python path is empty");
  t.python = std::move(*py);
  return t;
}

}  // namespace npuprof::workers
