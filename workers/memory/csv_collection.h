// The CSV collection of memory.collect_csvs, shared with memory.wait_flush
// (which runs it in its own remote command when msprof exported by itself,
// issue 38): the remote script that lists the PROF_*/device_<N> dirs and streams
// every *.csv over 100 bytes (a length-prefixed stream), and the reading of
// what it printed (pure: the PROF -> device map, the component maxima and
// APP peaks of the newest export, each device's activation peak inside the
// payload's inference window). Output over the one command's cap, or a
// stream that does not add up, is a failure, never a partial reading.
#pragma once

#include "workers/memory/memory_tasks.h"
#include "workers/remote.h"
#include "workers/task_outcome.h"

namespace npuprof::workers {

// $1 = the msprof output dir; exit 3 when it does not exist.
const char* CsvStreamScript();

// The collection's outcome from the script's run (its exit status, stdout
// and what the cap left out).
TaskOutcome CsvsFromStream(const tasks::MemoryCollectCsvs& p, const ssh::ExecResult& run);

}  // namespace npuprof::workers
