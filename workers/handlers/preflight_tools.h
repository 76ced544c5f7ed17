// memory-profile's tool checks in one remote command: where msprof is,
// what `msprof --help` prints (and its exit status), and the first Python
// (python3, then python) that can `import torch_npu`. Run after the
// machine's env script like every tool command, so the env script is
// sourced once for the three checks instead of once each. The command is
// built from argv; its output is read here, purely, and a caller that cannot
// use it runs the checks one by one.
//
// Output of PreflightToolsArgv():
//   npuprof-preflight 1
//   msprof-missing                          (and nothing more), or
//   msprof <base64 of its path>
//   help <exit status> <base64 of stdout+stderr, at most kMaxHelpBytes>
//   python <base64 of sys.executable> | python-missing
// A target without `base64 -w` fails the command (exit 3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace npuprof::workers {

inline constexpr uint64_t kMaxHelpBytes = 256 * 1024;

struct PreflightTools {
  bool msprof_found = false;
  std::string msprof_path;  // first line of `command -v msprof`
  int help_exit = 0;
  std::string help_text;    // msprof --help's stdout and stderr, as bytes
  std::string python;       // "" when no Python imports torch_npu
};

std::vector<std::string> PreflightToolsArgv();
Result<PreflightTools> ParsePreflightTools(const std::string& out);

}  // namespace npuprof::workers
