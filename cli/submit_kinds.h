// Each run kind's `npuprof submit KIND` subcommand lives in its own file
// (submit_<kind>.cc) and is added through one of these. Shared plumbing:
#pragma once

#include <string>

#include "cli/commands.h"

namespace npuprof::cli {

struct SubmitCommon {
  ServerAddress addr;
  std::string machine;
  std::string tag;
  std::string run_id;
  bool wait = false;
  bool quiet = false;  // stdout: the run id alone (scripts, agents)
};

// Adds the subcommand with --machine (required unless machine_required=false),
// --tag, --run-id, --wait, --data-dir, --broker.
CLI::App* AddSubmitKind(CLI::App* submit, const std::string& name, const std::string& help, SubmitCommon* c,
                        bool machine_required = true);
// Submits spec (machine/tag added from c); prints {"run_id"} or, with --wait,
// follows the run and prints its summary (manifest=false) or manifest.
void SubmitAndMaybeWait(const SubmitCommon& c, const std::string& kind, json spec, bool manifest);

// While set (`submit sweep` builds each point's child spec with the child
// kind's own parser), SubmitAndMaybeWait stores the spec here instead of
// submitting it.
struct CapturedSubmit {
  std::string kind;
  json spec;
  bool captured = false;
};
CapturedSubmit*& SubmitCapture();

void AddSubmitProbe(CLI::App* submit);
void AddSubmitServe(CLI::App* submit);          // issue: serve run kind
void AddSubmitTorchProfile(CLI::App* submit);   // issue: torch-profile + analyse-root
void AddSubmitMemoryProfile(CLI::App* submit);  // issue: memory-profile
void AddSubmitSweep(CLI::App* submit);          // one child run per grid point (cli/submit_sweep.cc)

}  // namespace npuprof::cli
