#include "workers/handlers/preflight_in_one.h"

#include <fmt/format.h>

#include "common/split_lines.h"
#include "workers/handlers/preflight_tools.h"

namespace npuprof::workers {

namespace {

// $1 the wrap script's path, $2 its text, $3 the tool check's script, $4 its
// help cap, then the dir check's argv. Each part's output is printed as it
// came (its trailing newlines restored); a failing part's status is the
// command's and nothing after it runs.
constexpr const char* kPreflight = R"SH(wrap=$1 text=$2 tools=$3 cap=$4; shift 4
t=$(sh -c "$tools" npuprof-preflight "$cap"); rc=$?
[ -n "$t" ] && printf '%s\n' "$t"
[ "$rc" -eq 0 ] || exit "$rc"
case "$t" in *"
python "*) ;; *) exit 0 ;; esac
echo npuprof-dir-check
out=$("$@"); rc=$?
[ -n "$out" ] && printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
case "
$out
" in *"
dir ok
"*) ;; *) exit 0 ;; esac
if [ -L "$wrap" ]; then exit 0; fi
if [ -e "$wrap" ] && { [ ! -f "$wrap" ] || [ ! -O "$wrap" ]; }; then exit 0; fi
if (umask 077 && printf '%s' "$text" >"$wrap" && chmod 700 "$wrap") 2>/dev/null; then echo npuprof-wrap-written; else echo npuprof-wrap-failed; fi
exit 0)SH";

constexpr std::string_view kDirMarker = "npuprof-dir-check";
constexpr std::string_view kWritten = "npuprof-wrap-written";
constexpr std::string_view kWriteFailed = "npuprof-wrap-failed";

}  // namespace

std::vector<std::string> PreflightInOneArgv(const std::vector<std::string>& runtime_dir_argv,
                                            const std::string& wrap_path, const std::string& wrap_text) {
  const std::vector<std::string> tools = PreflightToolsArgv();  // sh -c SCRIPT NAME CAP
  std::vector<std::string> argv = {"sh", "-c", kPreflight, "npuprof-preflight-all", wrap_path, wrap_text,
                                   tools.at(2), tools.at(4)};
  argv.insert(argv.end(), runtime_dir_argv.begin(), runtime_dir_argv.end());
  return argv;
}

Result<PreflightInOne> SplitPreflightInOne(std::string_view out) {
  PreflightInOne p;
  for (const std::string_view line : SplitLines(out)) {
    if (line == kDirMarker) {
      if (p.dir_checked) return Status::Corruption("the preflight printed its dir-check marker twice");
      p.dir_checked = true;
      continue;
    }
    if (line == kWritten || line == kWriteFailed) {
      if (!p.dir_checked || p.write != PreflightInOne::Write::kNotTried)
        return Status::Corruption(fmt::format("the preflight printed '{}' out of place", line));
      p.write = line == kWritten ? PreflightInOne::Write::kWritten : PreflightInOne::Write::kFailed;
      continue;
    }
    if (p.write != PreflightInOne::Write::kNotTried)
      return Status::Corruption("the preflight printed more after the wrap script's write");
    std::string& to = p.dir_checked ? p.dir_out : p.tools_out;
    to.append(line);
    to.push_back('\n');
  }
  return p;
}

}  // namespace npuprof::workers
