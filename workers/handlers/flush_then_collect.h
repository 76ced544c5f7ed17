// memory.wait_flush's poll, the look for msprof's own export and the CSV
// collection in one remote command (issue 38): where msprof's application
// mode already exported every PROF dir, the flush wait, memory.export's check
// and memory.collect_csvs need no decision from here in between, so they
// cost one round trip instead of three tasks.
//
// The command runs two argvs one after the other: the flush poll
// (MsprofFlushPollArgv, flush_signals.h) and then the export check with the
// CSV stream after it (AutoExportCheckArgv with CsvStreamScript(),
// auto_export_check.h, workers/memory/csv_collection.h: the stream follows
// only where the check itself found every PROF dir exported and no export
// started). Both are passed as positional words; the only text evaluated is
// built from indices ("${1}" "${2}" ...), never from a value.
//
// Output: "npuprof-flush <poll exit status> <poll bytes>", the poll's output
// (exactly that many bytes, trailing newlines removed) and a newline, then
// the check's output — or, while the poll saw a process of the service's
// group alive ("leader=alive", "members=N" with N > 0: the flush is not over,
// its outputs not final), the line "npuprof-check-skipped" instead, so that
// no poll before the last streams CSVs; the command's exit status is the
// check's (or, after
// its "npuprof-then" line, the stream's). The poll's part is counted, so no
// byte of a PROF dir's name can move where it ends.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::workers {

// Both argvs start with the program to run (the poll's "sh", "-c", ...).
std::vector<std::string> FlushThenCollectArgv(const std::vector<std::string>& poll_argv,
                                              const std::vector<std::string>& check_argv);

struct FlushThenCollectOut {
  int poll_exit = 0;
  std::string poll;   // the poll's output
  std::string check;  // the check's output (and the stream after its "npuprof-then" line)
};

// Reads the command's output (pure). Corruption when the first line is not
// the header or the output ends inside the poll's counted part (cut short).
Result<FlushThenCollectOut> SplitFlushThenCollect(std::string_view out);

}  // namespace npuprof::workers
