#include "workers/profiling/remote_analyse.h"

namespace npuprof::profiling {

namespace {

// $1 = dir, $2 = marker prefix. The detached shell runs analyse() with the
// dir as sys.argv[1] (no path inside Python source), then publishes the exit
// code atomically. Its pid ($!: nohup execs the shell in the background
// job's own process) is published atomically by the launcher right after
// the fork, so the launch ends at once, with no wait for the detached shell
// to write it. NPUPROF_ANALYSE_EXPORT_TYPE, when set in its environment, is
// analyse()'s export_type ("text" | "db").
constexpr const char* kLaunch = R"SH(d="$1"; m="$2"
[ -d "$d" ] || { echo "no such directory: $d" >&2; exit 4; }
[ -w "$d" ] || { echo "directory not writable (analyse() writes ASCEND_PROFILER_OUTPUT there): $d" >&2; exit 5; }
if [ -f "$m.rc" ]; then echo done; exit 0; fi
if [ -f "$m.pid" ] && kill -0 "$(cat "$m.pid" 2>/dev/null)" 2>/dev/null; then echo running; exit 0; fi
rm -f "$m.pid" "$m.pid.tmp" "$m.rc.tmp"
nohup sh -c '"${NPUPROF_PYTHON:-python3}" -c "import os, sys; from torch_npu.profiler.profiler import analyse; e = os.environ.get(\"NPUPROF_ANALYSE_EXPORT_TYPE\"); analyse(sys.argv[1], export_type=e) if e else analyse(sys.argv[1])" "$1" > "$2.log" 2>&1; echo $? > "$2.rc.tmp"; mv -f "$2.rc.tmp" "$2.rc"' npuprof-analyse "$d" "$m" </dev/null >/dev/null 2>&1 &
echo $! > "$m.pid.tmp" && mv -f "$m.pid.tmp" "$m.pid" || exit 6
echo started)SH";

constexpr const char* kAlive = R"SH(if [ -f "$1.rc" ]; then echo done; elif [ -f "$1.pid" ] && kill -0 "$(cat "$1.pid" 2>/dev/null)" 2>/dev/null; then echo alive; else echo gone; fi)SH";

}  // namespace

std::string DetachedAnalyseScript() { return kLaunch; }

std::vector<std::string> DetachedAnalyseArgv(const std::string& dir, const std::string& marker) {
  return {"sh", "-c", kLaunch, "npuprof-analyse", dir, marker};
}

std::vector<std::string> AnalyseAliveArgv(const std::string& marker) {
  return {"sh", "-c", kAlive, "npuprof-analyse-check", marker};
}

std::string AnalyseMarker(const std::string& dir, const std::string& task_id) {
  std::string id = task_id;
  for (char& c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return dir + "/.npuprof_analyse." + id;
}

}  // namespace npuprof::profiling
