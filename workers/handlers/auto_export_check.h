// Whether msprof's application mode already exported a run's data: the one
// remote command that looks, built from argv, and the pure reading of its
// output. No I/O here; memory.export runs the command and decides with it.
//
// msprof run as the wrapper of an application (application mode) exports
// every PROF_* dir by itself once the application exits, before msprof exits
// ("[INFO] Export all data in <PROF> done." on its console, the CSVs in
// <PROF>/mindstudio_profiler_output). memory-profile's stop and flush wait
// already outlast that export, so a second `msprof --export=on` of the same
// data only costs time (minutes on 8 cards). A PROF dir counts as exported
// when both hold: its done line is in the console log, and its output dir has
// an npu_mem_*.csv and an npu_module_mem_*.csv of more than 100 bytes (the
// memory CSVs the collection reads; smaller files are headers only). A PROF
// dir without device data is no capture and is not counted. The same command
// says when the output dir does not exist at all (the service did not run
// under the wrap script), so that memory.export needs no look before it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace npuprof::workers {

struct AutoExportProf {
  std::string name;        // the PROF_* dir's name (bytes as listed)
  bool done_line = false;  // "Export all data in <name> done" in the console log
  int npu_mem = 0;         // npu_mem_*.csv files over 100 bytes in its output dir
  int module_mem = 0;      // npu_module_mem_*.csv files over 100 bytes
  bool exported() const { return done_line && npu_mem > 0 && module_mem > 0; }
};

struct AutoExportCheck {
  bool dir_missing = false;     // the msprof output dir does not exist (nothing else is said then)
  bool export_started = false;  // <dir>.export.pid exists: an earlier attempt started msprof --export
  std::vector<AutoExportProf> profs;
  int unparsed = 0;             // output lines not understood (any: not exported)
  // Every PROF dir with device data was exported by msprof itself (and there is one).
  bool AllExported() const;
  // "2 PROF dirs exported by msprof at the application's exit" or what is
  // missing: "PROF_x: no 'Export all data in PROF_x done' line; ...".
  std::string Describe() const;
};

// argv of the check: $1 = msprof output dir, $2 = msprof's console log.
// then_script (optional): a script run in the same command, with the output
// dir as $1, when the check found no export started and every PROF dir
// exported (the shell's own reading of the same rule, which the caller
// confirms with ParseAutoExportCheck): its output follows the line
// "npuprof-then" and its exit status is the command's (memory.wait_flush
// collects the CSVs so, flush_then_collect.h).
std::vector<std::string> AutoExportCheckArgv(const std::string& msprof_dir, const std::string& console_log,
                                             const std::string& then_script = "");
// The check's output and, after its "npuprof-then" line, the script's (pure).
std::pair<std::string_view, std::optional<std::string_view>> SplitAtThen(std::string_view out);
AutoExportCheck ParseAutoExportCheck(const std::string& out);

}  // namespace npuprof::workers
