// analyse() of one *_ascend_pt directory, run detached on the target so that
// a re-dispatched task re-attaches instead of running it twice. The rank
// digest program (rank_digest.h) runs the launch script in its first call.
//
// Marker files (prefix M = <dir>/.npuprof_analyse.<task id>):
//   M.pid  pid of the detached shell (written atomically by the launch right
//          after the fork: the launch waits for nothing)
//   M.log  analyse() stdout+stderr
//   M.rc   exit code, written (atomically via M.rc.tmp) when analyse() ends
// The marker carries the task id, so a later re-analyse of the same root
// (another run) starts afresh while a retry of the same task re-attaches.
#pragma once

#include <string>
#include <vector>

namespace npuprof::profiling {

// The environment variable the launch script hands analyse() as its
// export_type when set (torch-profile's --analyse-export-type).
inline constexpr const char* kAnalyseExportTypeEnv = "NPUPROF_ANALYSE_EXPORT_TYPE";

// argv that starts analyse() unless M.rc exists ("done") or M.pid names a live
// process ("running"); prints "started" when it launched it. dir and marker
// travel as positional parameters, never inside the script text.
std::vector<std::string> DetachedAnalyseArgv(const std::string& dir, const std::string& marker);
// The script of that argv alone (`sh -c SCRIPT npuprof-analyse DIR MARKER`):
// the rank digest program (rank_digest.h) runs it to start or attach.
std::string DetachedAnalyseScript();

// argv printing "alive" when M.pid names a live process, else "gone".
std::vector<std::string> AnalyseAliveArgv(const std::string& marker);

// Marker prefix for a task id (characters outside [A-Za-z0-9._-] become '_').
std::string AnalyseMarker(const std::string& dir, const std::string& task_id);

}  // namespace npuprof::profiling
