// npuprof: profiling and HBM-memory evidence from vLLM services on Ascend NPUs.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"npuprof: collect torch-profiler traces and HBM memory evidence from vLLM on Ascend NPUs"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every verb");
  npuprof::cli::AddServerCommand(app);
  npuprof::cli::AddWorkerCommand(app);
  npuprof::cli::AddSubmitCommand(app);
  npuprof::cli::AddRunCommands(app);
  npuprof::cli::AddMachineCommand(app);
  npuprof::cli::AddInspectCommand(app);
  npuprof::cli::AddReportCommand(app);
  npuprof::cli::AddCompareCommand(app);
  npuprof::cli::AddTraceCommand(app);
  npuprof::cli::AddExportCommand(app);
  npuprof::cli::AddDemoCommand(app);
  npuprof::cli::AddKeysCommand(app);
  npuprof::cli::AddCompletionCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return npuprof::cli::ExitCode();
}
