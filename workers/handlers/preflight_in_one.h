// memory.preflight in one remote command (issue 42), where before it was
// three: the tool check (preflight_tools.h), the wrap script's runtime dir
// check (RuntimeDirArgv, service_runtime_dir.h) and the write of the wrap
// script. No decision of npuprof's is needed between them: the dir is
// checked only when the tools passed (msprof found, a Python importing
// torch_npu), and the script is written only when the check accepted the dir
// ("dir ok") and the script's name there is absent, or a regular file (not a
// symbolic link) owned by the SSH user — never more than the verdict of
// UntrustedFile would allow, which the caller still applies to the report.
// Built from argv; the output is read here, purely.
//
// Output: the tool check's lines as PreflightToolsArgv prints them; then,
// when the dir was checked, the line "npuprof-dir-check" and the check's
// report as it printed it; then, when a write was tried, one line
// "npuprof-wrap-written" or "npuprof-wrap-failed" (the caller writes it again
// with a file operation, which names the cause). The command's exit status is
// the tool check's while it runs, then the dir check's (a refusal is on
// stderr as the check writes it: RuntimeDirReportOf reads both); 0 otherwise.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::workers {

// runtime_dir_argv: the check of the wrap script's dir (InspectRuntimeDirArgv,
// create=true, the script's name as its entry); wrap_path: dir/name
// (absolute); wrap_text: the script (at most service::kMaxInlineFileBytes).
std::vector<std::string> PreflightInOneArgv(const std::vector<std::string>& runtime_dir_argv,
                                            const std::string& wrap_path, const std::string& wrap_text);

struct PreflightInOne {
  std::string tools_out;     // the tool check's lines (ParsePreflightTools reads them)
  bool dir_checked = false;  // "npuprof-dir-check" was printed: the tools passed and the check ran
  std::string dir_out;       // the check's report (ParseRuntimeDirReport reads it)
  enum class Write { kNotTried, kWritten, kFailed } write = Write::kNotTried;
};

// Splits the output (pure). Corruption when a marker line comes twice, or a
// write line comes without the dir check or before its report ends.
Result<PreflightInOne> SplitPreflightInOne(std::string_view out);

}  // namespace npuprof::workers
