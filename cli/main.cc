// npuprof: profiling and HBM-memory evidence from vLLM services on Ascend NPUs.
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/log_text.h"
#include "common/terminal_text.h"

int main(int argc, char** argv) {
  npuprof::cli::UseTerminalSafeLogLines();
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
  npuprof::cli::AddAdviseCommand(app);
  npuprof::cli::AddTraceCommand(app);
  npuprof::cli::AddExportCommand(app);
  npuprof::cli::AddDemoCommand(app);
  npuprof::cli::AddKeysCommand(app);
  npuprof::cli::AddCompletionCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes the arguments it refuses: printed with their control
    // characters escaped, like every other message (common/terminal_text.h).
    std::ostringstream out, err;
    const int rc = app.exit(e, out, err);
    std::cout << npuprof::TerminalText(out.str()) << std::flush;
    std::cerr << npuprof::TerminalText(err.str()) << std::flush;
    return rc == 0 ? 0 : 2;
  }
  return npuprof::cli::ExitCode();
}
