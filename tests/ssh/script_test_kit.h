// What the tests of remote shell scripts share: they run a script's argv in a
// local shell (RunLocalArgv) over files they lay out in a temporary dir
// (TempDir, Write: a file written with its parent dirs). A test file says
// `using namespace npuprof::testing::script_kit;` in its own namespace.
#pragma once

#include <string>

#include "tests/ssh/local_shell.h"
#include "tests/support/temp_dir.h"

namespace npuprof::testing::script_kit {

using npuprof::ssh::testing::RunLocalArgv;
using npuprof::testing::TempDir;

inline void Write(const std::string& path, const std::string& body) { npuprof::testing::WriteTree(path, body); }

}  // namespace npuprof::testing::script_kit
