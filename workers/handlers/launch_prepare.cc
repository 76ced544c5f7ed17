#include "workers/handlers/launch_prepare.h"

#include <fmt/format.h>

#include "common/split_lines.h"
#include "workers/handlers/service_scripts.h"

namespace npuprof::workers::service {

namespace {

// $1 pick (0: none, 1: a port, 2: a multi-node head's ports), $2 the pick's
// python, $3 and $4 its arguments (mode 2: the RPC port, pick the API port
// 1|0), $5 the runtime dir, $6 N, then N entry names, then the check's argv.
// The check's output is printed as it came (its trailing newlines
// restored), its status is the command's.
constexpr const char* kPrepare = R"SH(pick=$1 py=$2 a1=$3 a2=$4 rt=$5 n=$6; shift 6
names=
while [ "$n" -gt 0 ]; do names="$names $1"; shift; n=$((n-1)); done
out=$("$@"); rc=$?
[ -n "$out" ] && printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
[ "$pick" = 1 ] || [ "$pick" = 2 ] || exit 0
case "
$out
" in *"
dir ok
"*) ;; *) exit 0 ;; esac
for e in $names; do if [ -e "$rt/$e" ] || [ -L "$rt/$e" ]; then exit 0; fi; done
if [ "$pick" = 2 ]; then
  if hp=$("${NPUPROF_PYTHON:-python3}" -S -c "$py" "$a1" "$a2" </dev/null); then
    case $hp in *"
"*) echo npuprof-head-ports-failed ;; *) printf 'npuprof-head-ports %s\n' "$hp" ;; esac
  else echo npuprof-head-ports-failed; fi
  exit 0
fi
if port=$("${NPUPROF_PYTHON:-python3}" -S -c "$py" </dev/null); then printf 'npuprof-port %s\n' "$port"; else echo npuprof-port-failed; fi
exit 0)SH";

std::vector<std::string> PrepareArgv(const std::vector<std::string>& runtime_dir_argv, const std::string& runtime_dir,
                                     const std::vector<std::string>& first_entries, const char* pick,
                                     const std::vector<std::string>& pick_argv, const std::string& a1,
                                     const std::string& a2) {
  std::vector<std::string> argv = {"sh", "-c", kPrepare, "npuprof-prepare", pick, pick_argv.at(3), a1, a2,
                                   runtime_dir, std::to_string(first_entries.size())};
  argv.insert(argv.end(), first_entries.begin(), first_entries.end());
  argv.insert(argv.end(), runtime_dir_argv.begin(), runtime_dir_argv.end());
  return argv;
}

}  // namespace

std::vector<std::string> LaunchPrepareArgv(const std::vector<std::string>& runtime_dir_argv,
                                           const std::string& runtime_dir,
                                           const std::vector<std::string>& first_entries, bool pick_port) {
  return PrepareArgv(runtime_dir_argv, runtime_dir, first_entries, pick_port ? "1" : "0", FreePortArgv(), "", "");
}

std::vector<std::string> LaunchPrepareHeadArgv(const std::vector<std::string>& runtime_dir_argv,
                                               const std::string& runtime_dir,
                                               const std::vector<std::string>& first_entries, int32_t rpc_port,
                                               bool pick_api) {
  return PrepareArgv(runtime_dir_argv, runtime_dir, first_entries, "2", HeadPortsArgv(rpc_port, pick_api),
                     std::to_string(rpc_port), pick_api ? "1" : "0");
}

Result<PreparedHeadPorts> ParsePreparedHeadPorts(std::string_view out, bool pick_api) {
  constexpr std::string_view kLine = "npuprof-head-ports";
  PreparedHeadPorts p;
  for (const std::string_view line : SplitLines(out)) {
    if (line.rfind(kLine, 0) != 0) continue;
    if (p.asked) return Status::Corruption("the launch's head port check printed more than one line");
    p.asked = true;
    if (line == "npuprof-head-ports-failed") continue;
    if (line.substr(kLine.size(), 1) != " ")
      return Status::Corruption(fmt::format("the launch's head port check printed {:?}, not "
                                            "\"npuprof-head-ports <api> free|busy:<errno>\"",
                                            std::string(line.substr(0, 80))));
    auto ports = ParseHeadPorts(std::string(line.substr(kLine.size() + 1)), pick_api);
    if (!ports.ok()) return ports.status();
    p.ports = *ports;
  }
  return p;
}

Result<PreparedPort> ParsePreparedPort(std::string_view out) {
  PreparedPort p;
  for (const std::string_view line : SplitLines(out)) {
    if (line.rfind("npuprof-port", 0) != 0) continue;
    if (p.asked) return Status::Corruption("the launch's port pick printed more than one port line");
    p.asked = true;
    if (line == "npuprof-port-failed") continue;
    const std::string_view digits = line.rfind("npuprof-port ", 0) == 0 ? line.substr(13) : std::string_view{};
    if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string_view::npos)
      return Status::Corruption(
          fmt::format("the launch's port pick printed {:?}, not \"npuprof-port <port>\"", std::string(line.substr(0, 80))));
    const int port = std::stoi(std::string(digits));
    if (port <= 0 || port > 65535)
      return Status::Corruption(fmt::format("the launch's port pick printed port {}, not 1..65535", port));
    p.port = port;
  }
  return p;
}

}  // namespace npuprof::workers::service
