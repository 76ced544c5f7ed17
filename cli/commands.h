// Every `npuprof` verb registers itself on the CLI11 app through one of these.
// A verb's callback leaves its exit code in ExitCode(): 0 ok, 1 the run
// failed, 2 usage or transport error.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/client.h"

namespace npuprof::cli {

int& ExitCode();
// Adds --data-dir, --broker, --key-file and --server-key to a client verb.
void AddServerOptions(CLI::App* cmd, ServerAddress* addr);
// What the CLI prints goes through these (or through TerminalText /
// TerminalLine of common/terminal_text.h where a verb lays out its own
// lines): text from a target, a stored event or the command line never
// reaches the terminal with its control characters raw.
// Prints JSON on stdout (pretty; DEL and C1 characters escaped too).
void PrintJson(const json& j);
// Prints text for people (a report) on stdout, control characters escaped.
void PrintText(const std::string& text);
// Prints "npuprof: <msg>" on stderr, control characters escaped, and sets exit code.
void Fail(int code, const std::string& msg);
// Streams a run's new events to stderr (polling; waits up to 2 min for a
// server that is not answering) until stop(new events) returns true. False
// after a transport error (already reported with Fail).
// quiet: no progress lines on stderr.
bool FollowRunEvents(Client& client, const std::string& run_id, const std::function<bool(const json&)>& stop,
                     bool quiet = false);
// Follows a run to its end, streaming new events to stderr; prints the final
// summary (or manifest when manifest=true) on stdout; sets the exit code.
// quiet: prints only the run id (the exit code still says how it ended).
void WaitForRun(Client& client, const std::string& run_id, bool manifest, bool quiet = false);

void AddServerCommand(CLI::App& app);
void AddWorkerCommand(CLI::App& app);
void AddSubmitCommand(CLI::App& app);
void AddRunCommands(CLI::App& app);     // runs, show, watch, events, cancel, manifest, workers
void AddMachineCommand(CLI::App& app);
void AddInspectCommand(CLI::App& app);
void AddReportCommand(CLI::App& app);     // report RUN [--format json|text|html] [--lang zh|en] [-o FILE]
void AddCompareCommand(CLI::App& app);    // compare RUN_A RUN_B [...] [--format json|text|html] [--lang zh|en] [-o FILE]
void AddTraceCommand(CLI::App& app);      // trace RUN [-o FILE]
void AddExportCommand(CLI::App& app);     // export RUN DIR (per-kind exporters: cli/export_registry.h)
void AddDemoCommand(CLI::App& app);
void AddAdviseCommand(CLI::App& app);     // advise RUN [--format json|text] [--verify [--wait]] (cmd_advise.cc)
void AddKeysCommand(CLI::App& app);       // keys [show] | new | allow | list | remove (cmd_keys.cc)
void AddCompletionCommand(CLI::App& app);  // hidden: `completion bash`, from the verbs registered on app

}  // namespace npuprof::cli
