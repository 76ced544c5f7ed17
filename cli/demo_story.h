// What `npuprof demo` prints for each step: a few lines a person reads,
// rendered from the step's own output (the JSON or text a `npuprof` verb
// printed). The full output of every step is written to a file by the demo;
// these lines only pick what tells the story — the devices found, what a
// queued run waited for, the gates, the HBM table, the verify verdict.
//
// Pure: no I/O. Input that is not what a view expects (not JSON, missing
// fields) is shown as its first lines, never an error.
#pragma once

#include <string>
#include <vector>

namespace npuprof::cli {

enum class StoryView {
  kMachines,    // machine list
  kCheck,       // machine check
  kProbe,       // submit probe --wait: the device table
  kService,     // a serve run's show/--wait: where it runs
  kSubmitted,   // a submission without --wait
  kText,        // text output as is (runs table)
  kStopped,     // stop --wait
  kTorch,       // torch-profile --wait: gates, ranks, outputs
  kMemory,      // memory-profile --wait: HBM per phase
  kReportText,  // report --format text: the component tables without the evidence lines
  kCompareText,  // compare --format text: the runs, the configuration differences and the totals
  kFiles,       // export / report -o / trace -o: what was written where
  kVerify,      // verify: the verdict
  kSweep,       // submit sweep --wait: each point's run and status
  kDeploymentMemory,  // report --format json of a multi-node memory-profile: one line per (machine, device), the totals
  kDeploymentRun,     // memory-profile --wait over several nodes: each node, its service, HBM after inference, clock offsets
};

// At most `max_lines` lines (the last says how many were left out).
std::vector<std::string> StoryLines(StoryView view, const std::string& out, size_t max_lines = 60);

}  // namespace npuprof::cli
